"""LiveJobCount, kept by PostgreSQL: statement triggers on jobs_trainingjob apply each statement's
change of live jobs per (cluster, namespace) in the same transaction (apps/jobs/models.py says why).

The deltas of a statement are summed per (cluster, namespace) from its transition tables and written
in key order, so two statements that move jobs in several namespaces lock the count rows in the same
order (no deadlock between them); a statement that changes no job's liveness or place writes nothing.
The backfill runs with writes to the jobs held off (SHARE ROW EXCLUSIVE), so no change falls between
counting and the triggers. SQLite keeps no counts (the embedded default counts the jobs).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

from apps.core.migration_steps import on_postgresql

_INSERT_DELTAS = """
    INSERT INTO jobs_livejobcount (cluster_id, namespace, live)
    SELECT cluster_id, namespace, delta FROM ({deltas}) AS deltas
    WHERE delta <> 0
    ORDER BY cluster_id, namespace
    ON CONFLICT (cluster_id, namespace) DO UPDATE SET live = jobs_livejobcount.live + EXCLUDED.live;
"""
_LIVE = "SELECT cluster_id, namespace, {sign} AS delta FROM {table} WHERE deleted_at IS NULL"
_SUMMED = "SELECT cluster_id, namespace, sum(delta) AS delta FROM ({rows}) AS changes GROUP BY cluster_id, namespace"


def _function(name: str, body: str) -> str:
    return (
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NULL; END $$;"
    )


_NEW = _LIVE.format(sign=1, table="jobs_live_new")
_OLD = _LIVE.format(sign=-1, table="jobs_live_old")
# One function per event: a transition table exists only in the trigger that declares it.
_FUNCTIONS = {
    "insert": _INSERT_DELTAS.format(deltas=_SUMMED.format(rows=_NEW)),
    "update": _INSERT_DELTAS.format(deltas=_SUMMED.format(rows=f"{_NEW} UNION ALL {_OLD}")),
    "delete": _INSERT_DELTAS.format(deltas=_SUMMED.format(rows=_OLD)),
    "truncate": "DELETE FROM jobs_livejobcount;",
}
_TRANSITIONS = {
    "insert": "REFERENCING NEW TABLE AS jobs_live_new",
    "update": "REFERENCING OLD TABLE AS jobs_live_old NEW TABLE AS jobs_live_new",
    "delete": "REFERENCING OLD TABLE AS jobs_live_old",
    "truncate": "",
}

CREATE = [
    # The backfill, with writes to the jobs held off until the migration's transaction ends.
    "LOCK TABLE jobs_trainingjob IN SHARE ROW EXCLUSIVE MODE",
    "DELETE FROM jobs_livejobcount",
    "INSERT INTO jobs_livejobcount (cluster_id, namespace, live) SELECT cluster_id, namespace, count(*)"
    " FROM jobs_trainingjob WHERE deleted_at IS NULL GROUP BY cluster_id, namespace",
    *(_function(f"jobs_live_job_count_{event}", body) for event, body in _FUNCTIONS.items()),
    *(
        f"CREATE TRIGGER jobs_live_job_count_on_{event} AFTER {event.upper()} ON jobs_trainingjob "
        f"{_TRANSITIONS[event]} FOR EACH STATEMENT EXECUTE FUNCTION jobs_live_job_count_{event}()"
        for event in _FUNCTIONS
    ),
]
DROP = [
    *(f"DROP TRIGGER IF EXISTS jobs_live_job_count_on_{event} ON jobs_trainingjob" for event in _FUNCTIONS),
    *(f"DROP FUNCTION IF EXISTS jobs_live_job_count_{event}()" for event in _FUNCTIONS),
]


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_could_save_rounded")]

    operations = [
        migrations.CreateModel(
            name="LiveJobCount",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("cluster_id", models.BigIntegerField()),
                ("namespace", models.CharField(max_length=63)),
                ("live", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("cluster_id", "namespace"), name="uniq_live_job_count")
                ],
            },
        ),
        migrations.RunPython(on_postgresql(CREATE), on_postgresql(DROP)),
    ]
