"""The request id crosses into Celery: a message header set when a task is published, bound while
the task runs, and so in every log line the task writes (issue #27 item 1).

A request that saves a policy enqueues its push; the worker's lines about that push carry the id the
request's response returned in ``X-Request-ID``. A task that enqueues another passes its id on.
Also here: the worker's log handlers get the request-id filter, and the JSON formatter when
``LOG_FORMAT=json``, since Celery sets up the worker's logging itself.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import signals

from apps.core.middleware import RequestIdLogFilter, bind_request_id, current_request_id, unbind_request_id

HEADER = "request_id"
log = logging.getLogger(__name__)
_tokens: dict[str, Any] = {}  # task id → the context token to reset after it ran


@signals.before_task_publish.connect
def carry_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    request_id = current_request_id()
    if headers is not None and request_id != "-" and not headers.get(HEADER):
        headers[HEADER] = request_id


@signals.task_prerun.connect
def bind_task_request_id(task_id: str = "", task: Any = None, **_: Any) -> None:
    request_id = str(getattr(getattr(task, "request", None), HEADER, None) or "-")
    _tokens[task_id] = bind_request_id(request_id)
    log.info("task %s[%s] started", getattr(task, "name", "?"), task_id)


@signals.task_postrun.connect
def unbind_task_request_id(task_id: str = "", **_: Any) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        unbind_request_id(token)


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def request_id_in_worker_logs(logger: logging.Logger, **_: Any) -> None:
    from django.conf import settings

    for handler in logger.handlers:
        handler.addFilter(RequestIdLogFilter())
        if getattr(settings, "LOG_FORMAT", "plain") == "json":
            from pythonjsonlogger.json import JsonFormatter

            json_format = settings.LOGGING["formatters"]["json"]
            handler.setFormatter(
                JsonFormatter(json_format["fmt"], rename_fields=json_format["rename_fields"])
            )
        else:
            handler.setFormatter(
                logging.Formatter("[%(asctime)s: %(levelname)s/%(processName)s] [%(request_id)s] %(message)s")
            )
