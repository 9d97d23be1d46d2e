"""The in-effect view of a job, cached under a fingerprint of every row it is derived from.

``in_effect`` (``in_effect.py``) reads the job's incarnations, revisions and written pushes and
renders the desired state of the pending revisions: about half of the job detail's and the policy
GET's CPU (bench/profile_api.py). The answer changes only when one of those rows does, so it is
kept in the shared cache with the fingerprint of its inputs, and served only while a fresh
fingerprint (one cheap query) is the same:

- the job's own fields that the view reads (uid, name, namespace, framework, replicas, NPUs per pod,
  release, current revision), taken from the very instance the view is computed from;
- every incarnation, revision and written (applied / drifted) push of the job, each as ``id:xmin``.
  ``xmin`` is PostgreSQL's row version: it changes with every UPDATE of the row and never returns to
  an earlier value, so any write (a PodGroup observed, an Init snapshot, a push finished, drift
  checked, a row deleted or added) gives a new fingerprint;
- a digest of the code that computes the view, so a new release never serves an old release's answer.

Each process also keeps the last answers it served (``_Recent``, pickled so no caller can change
them), checked against the same fresh fingerprint: a job read again skips the shared cache's round
trip and its decoding (6 % of the job detail's CPU, bench/profile_api.py).

Nothing is invalidated by the writers: a changed row simply no longer matches, so no writer
(ingester, push, adoption, admission, recreate) needs to know this cache exists, and there is no
window in which a stale answer could be read. On a miss the view is computed in the same snapshot as
its fingerprint (REPEATABLE READ) or, inside a caller's transaction, between two equal fingerprints.
Without PostgreSQL (the embedded SQLite) or when the cache cannot be reached, the view is computed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import QuerySet, TextField
from django.db.models.expressions import RawSQL
from redis.exceptions import RedisError

from apps.jobs.models import JobIncarnation, TrainingJob
from apps.policies.models import PolicyRevision, PolicySync

log = logging.getLogger(__name__)

CACHE_SECONDS = 24 * 3600  # one entry per job, overwritten on change: the timeout only bounds memory
RECENT_PER_PROCESS = 4096  # in-process entries (a few KB each): the jobs a web process reads most
_WRITTEN = (PolicySync.State.APPLIED, PolicySync.State.DRIFTED)


def _code_digest() -> str:
    """The source of everything the view is computed with (this app's in-effect modules, the
    renderer, the desired state, the MindCluster facts)."""
    policies = Path(__file__).resolve().parent
    files = [
        policies / "in_effect.py",
        policies / "observed.py",
        policies / "preview.py",
        policies / "spec.py",
        *sorted((policies / "desired").rglob("*.py")),
        *sorted((policies / "rendering").rglob("*.py")),
        *sorted((policies.parent.parent / "mindcluster").glob("*.py")),
    ]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


CODE_DIGEST = _code_digest()

# Every incarnation, revision and written push of one job as ``id:xmin``, in one text column
# correlated on ``"jobs_trainingjob"."id"``: string_agg of nothing is NULL, which counts as "".
# The job endpoints that serve the view select it with the job itself (``ROWS_FINGERPRINT`` as an
# annotation, ``with_rows_fingerprint``): one round trip less, and the job row and its fingerprint
# from the same snapshot.
_JOB_ID = f'"{TrainingJob._meta.db_table}"."id"'
_ROWS_FINGERPRINT_SQL = (
    f"COALESCE((SELECT string_agg(i.id::text || ':' || i.xmin::text, ',' ORDER BY i.id)"
    f" FROM {JobIncarnation._meta.db_table} i WHERE i.job_id = {_JOB_ID}), '')"
    f" || '|' || COALESCE((SELECT string_agg(r.id::text || ':' || r.xmin::text, ',' ORDER BY r.id)"
    f" FROM {PolicyRevision._meta.db_table} r WHERE r.job_id = {_JOB_ID}), '')"
    f" || '|' || COALESCE((SELECT string_agg(s.id::text || ':' || s.xmin::text, ',' ORDER BY s.id)"
    f" FROM {PolicySync._meta.db_table} s WHERE s.job_id = {_JOB_ID} AND s.state IN (%s, %s)), '')"
)
# The annotation's name: ``fingerprint`` takes (and drops) a value selected with the job.
ROWS_FINGERPRINT = "in_effect_rows"


def with_rows_fingerprint(jobs: QuerySet[TrainingJob]) -> QuerySet[TrainingJob]:
    """``jobs`` selecting each job's rows fingerprint too (PostgreSQL; elsewhere the view is not
    cached): the ``extra`` of ``job_for_request`` for the endpoints that serve the view."""
    if connection.vendor != "postgresql":
        return jobs
    rows = RawSQL(_ROWS_FINGERPRINT_SQL, _WRITTEN, output_field=TextField())
    return jobs.annotate(**{ROWS_FINGERPRINT: rows})


def _rows_fingerprint(job: TrainingJob) -> str:
    # Selected with the job by the endpoint that loaded it: used once, so a later fingerprint of
    # the same instance (after the view's reads, or after a write) is read afresh.
    selected = job.__dict__.pop(ROWS_FINGERPRINT, None)
    if selected is not None:
        return str(selected)
    with connection.cursor() as cursor:
        # The job's id as a one-row derived table under the job table's name, so the same
        # correlated expression serves here and as an annotation.
        one_job = f'(SELECT %s::bigint AS id) AS "{TrainingJob._meta.db_table}"'
        cursor.execute(f"SELECT {_ROWS_FINGERPRINT_SQL} FROM {one_job}", [*_WRITTEN, job.pk])
        row = cursor.fetchone()
    return str(row[0])


def fingerprint(job: TrainingJob) -> str:
    """What the in-effect view of ``job`` (this instance) is derived from, as one string."""
    fields = [
        job.pk,
        job.uid,
        job.name,
        job.namespace,
        job.framework,
        job.replicas,
        job.npus_per_pod,
        job.mindcluster_version,
        job.current_revision_id,
    ]
    own = json.dumps(fields, sort_keys=True, default=str)
    return hashlib.sha256(f"{CODE_DIGEST}|{own}|{_rows_fingerprint(job)}".encode()).hexdigest()


def cache_key(job_id: int) -> str:
    # With the database's name: two databases sharing one cache (benchmarks, a test run beside a
    # development server) have the same job ids and would keep overwriting each other's entries.
    return f"in-effect:{connection.settings_dict['NAME']}:{job_id}"


def cached_in_effect(job: TrainingJob, compute: Callable[[TrainingJob], dict[str, Any]]) -> dict[str, Any]:
    """``compute(job)``, or the stored answer for the same fingerprint."""
    if connection.vendor != "postgresql":
        return compute(job)
    key = fingerprint(job)
    view = _get(job.pk, key)
    if view is not None:
        return view
    if connection.in_atomic_block:
        # A caller's transaction (READ COMMITTED): rows may change between the fingerprint and the
        # reads, so only what was computed between two equal fingerprints is stored.
        view = compute(job)
        if fingerprint(job) == key:
            _set(job.pk, (key, view))
        return view
    # One snapshot for the fingerprint and every read of the computation.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        key = fingerprint(job)
        view = compute(job)
    _set(job.pk, (key, view))
    return view


class _Recent:
    """The last ``size`` answers of this process, by job: (fingerprint, pickled view), least recently
    used first out. Served only for an equal fresh fingerprint, so never staler than the shared cache."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, bytes]] = OrderedDict()

    def get(self, key: str, fingerprint: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None or found[0] != fingerprint:
                return None
            self._entries.move_to_end(key)
        view: dict[str, Any] = pickle.loads(found[1])  # pickled by this process: no foreign bytes
        return view

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def put(self, key: str, fingerprint: str, view: dict[str, Any]) -> None:
        data = pickle.dumps(view, pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._entries[key] = (fingerprint, data)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


RECENT = _Recent(RECENT_PER_PROCESS)


def _get(job_id: int, fingerprint: str) -> dict[str, Any] | None:
    """The view stored for ``fingerprint``: this process's copy, else the shared cache's."""
    key = cache_key(job_id)
    view = RECENT.get(key, fingerprint)
    if view is not None:
        return view
    try:
        value = cache.get(key)
    except RedisError as exc:
        log.warning("in-effect cache unreachable (%s); computing", exc)
        return None
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == fingerprint):
        return None
    RECENT.put(key, fingerprint, value[1])
    stored: dict[str, Any] = value[1]
    return stored


def _set(job_id: int, value: tuple[str, dict[str, Any]]) -> None:
    RECENT.put(cache_key(job_id), *value)
    try:
        cache.set(cache_key(job_id), value, CACHE_SECONDS)
    except RedisError as exc:
        log.warning("in-effect cache unreachable (%s); not stored", exc)
