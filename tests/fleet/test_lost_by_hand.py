"""The fleet API's lost NPU-hours for a small history, worked out by hand (issue #26).

The fleet (``tests.support.fleet``): every duration below is measured from the stored events' times.

    llama  16 NPUs  2 incidents x (detect 5 s + decide 0 s + recover 60 s) = 130 s      no rollback
    gpt    32 NPUs  1 incident  x (detect 10 s + decide 2 s + recover 200 s) = 212 s    Job-level
                    rescheduling without a dump: rollback = half the checkpoint period
    bert    4 NPUs  1 incident  x (detect 3 s + decide 1 s + recover 36 s) = 40 s      failed, no rollback

With the default checkpoint period of 3600 s (rollback 1800 s):

    detection = (16 x 2 x 5 + 32 x 10 + 4 x 3) / 3600  = (160 + 320 + 12) / 3600   = 0.136667 NPU-h
    decision  = (16 x 2 x 0 + 32 x 2  + 4 x 1) / 3600  = (0 + 64 + 4) / 3600       = 0.018889
    recovery  = (16 x 2 x 60 + 32 x 200 + 4 x 36) / 3600 = (1920 + 6400 + 144) / 3600 = 2.351111
    rollback  = 32 x 1800 / 3600                                                   = 16
    total                                                                          = 18.506667

Scheduled: each job existed from the start of the day before yesterday until now (UTC):
16 + 32 + 4 = 52 NPUs x those hours.
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from apps.fleet.histogram import RELATIVE_RESOLUTION
from apps.fleet.summaries import scheduled_refresh_recent
from tests.support.fleet import Fleet
from tests.support.world import superuser_api_client

pytestmark = pytest.mark.django_db


def _get(client: APIClient, query: str = "") -> dict:
    response = client.get(f"/api/v1/fleet/{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_lost_npu_hours_equal_the_hand_computation(fleet: Fleet) -> None:
    now = timezone.now()
    # The day before yesterday and yesterday as beat counts them, and today so far.
    from apps.fleet.summaries import scheduled_refresh

    scheduled_refresh([(now - timedelta(days=d)).date() for d in (2, 1, 0)], now)
    body = _get(superuser_api_client())
    total = body["total"]
    lost = total["npu_hours_lost"]
    assert lost["detection"] == pytest.approx((16 * 2 * 5 + 32 * 10 + 4 * 3) / 3600, abs=1e-3)
    assert lost["decision"] == pytest.approx((32 * 2 + 4 * 1) / 3600, abs=1e-3)
    assert lost["recovery"] == pytest.approx((16 * 2 * 60 + 32 * 200 + 4 * 36) / 3600, abs=1e-3)
    assert lost["rollback"] == pytest.approx(32 * 1800 / 3600)
    assert lost["total"] == pytest.approx(18.506667, abs=1e-3)
    assert lost["rollbacks"] == 1
    assert lost["sources"]["detection"] == {"measured": 4}
    assert lost["sources"]["rollback"] == {"default": 1}

    hours = (now - fleet.created).total_seconds() / 3600
    assert total["npu_hours_scheduled"] == pytest.approx(52 * hours, rel=1e-3)
    assert total["effective_training_ratio"] == pytest.approx(1 - 18.506667 / (52 * hours), abs=1e-4)

    assert total["faults"]["total"] == 4
    assert total["faults"]["by_kind"] == {"hccl": 1, "node": 1, "uce": 2}
    yesterday = [b for b in total["faults"]["buckets"] if b["start"] == fleet.faults_at.date().isoformat()]
    assert yesterday == [
        {"start": fleet.faults_at.date().isoformat(), "total": 4, "by_kind": {"hccl": 1, "node": 1, "uce": 2}}
    ]
    assert len(total["faults"]["buckets"]) == 7
    # Time to recovery, fault → running: retry 65 s twice; job-rescheduling 212 s; the failed one
    # is not a recovery. Stored as histograms (apps.fleet.histogram, 16 buckets per doubling): 65 s
    # counts in bucket 1 + floor(16 x log2 65) = 97, [64, 66.834) s, shown as its geometric middle
    # 2^(96.5/16) = 65.401 s; 212 s in bucket 124, [206.143, 215.269) s, shown as 2^(123.5/16) = 210.657 s.
    # Both within 2.2 % of the true durations (the stated resolution).
    assert total["mttr_seconds"] == {
        "job-rescheduling": {"median": 210.657, "p90": 210.657, "samples": 1},
        "retry": {"median": 65.401, "p90": 65.401, "samples": 2},
    }
    for strategy, seconds in (("retry", 65), ("job-rescheduling", 212)):
        assert total["mttr_seconds"][strategy]["median"] == pytest.approx(seconds, rel=RELATIVE_RESOLUTION)
    assert total["recoveries"]["by_outcome"] == {"failed": 1, "recovered": 2, "rescheduled": 1}
    assert total["recoveries"]["by_strategy"]["recover"] == {"failed": 1}

    # Per cluster and per namespace: the same arithmetic, split.
    clusters = {c["cluster"]: c for c in body["clusters"]}
    assert clusters["west"]["npu_hours_lost"]["total"] == pytest.approx(4 * 40 / 3600, abs=1e-3)
    assert clusters["east"]["npu_hours_lost"]["total"] == pytest.approx(
        (16 * 130 + 32 * 212) / 3600 + 16, abs=1e-3
    )
    assert [(n["cluster"], n["namespace"]) for n in body["namespaces"]] == [
        ("east", "team-a"),
        ("west", "team-b"),
    ]
    assert clusters["east"]["jobs_url"] == "/?cluster=east"
    assert body["namespaces"][0]["jobs_url"] == "/?cluster=east&namespace=team-a"

    # The jobs that lost most: gpt (16 + 32 x 212 / 3600), llama (16 x 130 / 3600), bert.
    top = [(j["name"], j["npu_hours_lost"]) for j in body["top_jobs"]]
    assert top == [
        ("gpt", pytest.approx(16 + 32 * 212 / 3600, abs=1e-3)),
        ("llama", pytest.approx(16 * 130 / 3600, abs=1e-3)),
        ("bert", pytest.approx(4 * 40 / 3600, abs=1e-3)),
    ]
    assert body["top_jobs"][0]["url"] == f"/jobs/{fleet.gpt.pk}/"


def test_checkpoint_period_prices_the_rollback(fleet: Fleet) -> None:
    body = _get(superuser_api_client(), "?checkpoint_period_s=600")
    assert body["total"]["npu_hours_lost"]["rollback"] == pytest.approx(32 * 300 / 3600, abs=1e-3)
    period = body["model"]["assumptions"][0]
    assert (period["name"], period["value"], period["source"]) == ("checkpoint_period_s", 600, "user")


def test_summing_in_python_gives_what_postgresql_gives(fleet: Fleet) -> None:
    """The figures summed by the database (``jsonb_each``, ``GROUPING SETS``) and in Python (SQLite)."""
    from django.contrib.auth.models import User

    from apps.fleet.services import Scope, fleet_view

    scheduled_refresh_recent()
    root = User.objects.create_superuser("root2", password="pw")
    now = timezone.now()
    assert fleet_view(root, Scope(window_days=28), now, use_sql=True) == fleet_view(
        root, Scope(window_days=28), now, use_sql=False
    )


def test_rebuild_from_history_gives_the_same_figures(fleet: Fleet) -> None:
    client = superuser_api_client()
    scheduled_refresh_recent()
    kept = _get(client)
    out = io.StringIO()
    call_command("fleet_rebuild", stdout=out)
    assert json.loads(out.getvalue())["rebuilt"]["job_days"] == 3  # llama, gpt, bert: one day each
    rebuilt = _get(client)
    for name in ("npu_hours_lost", "faults", "mttr_seconds", "recoveries"):
        assert rebuilt["total"][name] == kept["total"][name]
    assert rebuilt["top_jobs"] == kept["top_jobs"]
    with pytest.raises(CommandError, match="YYYY-MM-DD"):
        call_command("fleet_rebuild", "--since", "yesterday")
