"""The request id crosses the Celery boundary (issue #27 item 1): a header set when a task is
published, bound while it runs, and in the worker's JSON log lines about it."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from apps.core import task_context
from apps.core.middleware import bind_request_id, current_request_id, unbind_request_id
from tests.support import wait_for


def test_publishing_inside_a_request_carries_its_id() -> None:
    token = bind_request_id("req-42")
    try:
        headers: dict[str, Any] = {}
        task_context.carry_request_id(headers=headers)
        assert headers == {"request_id": "req-42"}
        kept = {"request_id": "from-the-caller"}
        task_context.carry_request_id(headers=kept)  # an explicit header wins
        assert kept == {"request_id": "from-the-caller"}
    finally:
        unbind_request_id(token)
    outside: dict[str, Any] = {}
    task_context.carry_request_id(headers=outside)
    assert outside == {}  # no request, no header


def test_a_task_runs_with_the_id_it_was_sent_with_and_drops_it_after() -> None:
    class Request:
        request_id = "req-7"

    class Task:
        name = "demo"
        request = Request()

    task_context.bind_task_request_id(task_id="t1", task=Task())
    assert current_request_id() == "req-7"
    task_context.unbind_task_request_id(task_id="t1")
    assert current_request_id() == "-"


@pytest.mark.slow(seconds=10)
def test_the_worker_logs_the_request_id_in_json(worker_factory: Any, transactional_db: None) -> None:
    from controlplane.celery import app as celery_app

    worker = worker_factory(private=True, LOG_FORMAT="json")
    request_id = f"req-{uuid.uuid4().hex[:12]}"
    token = bind_request_id(request_id)
    try:
        result = celery_app.send_task("decisions.sweep", queue="default")
    finally:
        unbind_request_id(token)

    def started_line() -> dict[str, Any] | None:
        for line in worker.log.read_text(errors="replace").splitlines():
            if request_id in line and line.startswith("{"):
                record = json.loads(line)
                if record.get("message", "").startswith("task decisions.sweep["):
                    return record
        return None

    wait_for(lambda: started_line() is not None, 30, "the task's log line with the request id")
    record = started_line()
    assert record is not None
    assert record["request_id"] == request_id and record["level"] == "INFO"
    assert result.id in record["message"]
