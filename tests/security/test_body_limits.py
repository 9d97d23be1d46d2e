"""Issue #24 item 4: request bodies have a size limit (413), lists a cap, duplicates a linear check.

DRF reads the request stream itself, so Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` never applied to
the API; the limit is now enforced before any view (and, for bodies sent without a Content-Length,
in the ASGI layer, which Django's own handler would otherwise spool to disk whatever their size).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from rest_framework.test import APIClient

from apps.policies.validation import validate_policy
from apps.policies.validation.fields import MAX_LIST_ITEMS

TWENTY_MB = 20 * 1024 * 1024
VALIDATE = "/api/v1/policies/validate/"
ADMISSION = "/admission/ascendjobs/"


def _big_json() -> bytes:
    return json.dumps({"policy": {"strategies": ["recover"]}, "padding": "x" * TWENTY_MB}).encode()


def _assert_too_large(response: Any) -> None:
    assert response.status_code == 413, response.content[:300]
    body = response.json()
    [entry] = body["errors"]
    assert entry["code"] == "request_too_large"
    assert entry["field"] == "body"
    limit = settings.REQUEST_BODY_MAX_BYTES
    assert str(limit) in entry["message"], entry["message"]  # names the limit


@pytest.mark.django_db
def test_a_20_mb_json_body_to_the_api_gets_413_naming_the_limit(superuser_client: APIClient) -> None:
    response = superuser_client.generic("POST", VALIDATE, _big_json(), content_type="application/json")
    _assert_too_large(response)


@pytest.mark.django_db
def test_a_20_mb_body_is_refused_before_authentication() -> None:
    response = Client().generic("POST", VALIDATE, _big_json(), content_type="application/json")
    _assert_too_large(response)


@pytest.mark.django_db
@pytest.mark.urls("controlplane.admission_urls")  # the webhook exists only with ADMISSION_WEBHOOK=true
def test_a_20_mb_admission_review_gets_413() -> None:
    response = Client().generic("POST", ADMISSION, _big_json(), content_type="application/json")
    _assert_too_large(response)


@pytest.mark.django_db
def test_a_content_length_claiming_more_than_the_limit_is_refused_unread(superuser_client: APIClient) -> None:
    response = superuser_client.generic(
        "POST", VALIDATE, b'{"policy": {}}', content_type="application/json", CONTENT_LENGTH=str(TWENTY_MB)
    )
    _assert_too_large(response)


@pytest.mark.django_db
def test_a_content_length_claiming_less_than_sent_reads_only_what_it_claims(
    superuser_client: APIClient,
) -> None:
    """The extra bytes are never read: the truncated document is a 400 parse error, not a 500."""
    response = superuser_client.generic(
        "POST", VALIDATE, _big_json(), content_type="application/json", CONTENT_LENGTH="20"
    )
    assert response.status_code == 400, response.content[:300]


@pytest.mark.django_db
def test_a_body_just_under_the_limit_is_read() -> None:
    limit = settings.REQUEST_BODY_MAX_BYTES
    body = json.dumps({"policy": {"strategies": ["recover"]}, "pad": "x" * (limit - 100)}).encode()
    assert len(body) <= limit
    client = Client()
    response = client.generic("POST", VALIDATE, body, content_type="application/json")
    assert response.status_code in (401, 403), response.content[:300]  # read, then refused: not signed in


def _asgi_post(
    parts: list[bytes], headers: list[tuple[bytes, bytes]], path: str = VALIDATE
) -> tuple[int, dict[str, Any], int]:
    """POST through the real ASGI application, the body streamed in chunks (as ``Transfer-Encoding:
    chunked`` arrives); returns the status, the JSON body and how many chunks the server pulled."""
    from controlplane.asgi import application

    pulled = 0
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal pulled
        if pulled >= len(parts):
            await asyncio.sleep(3600)  # the client is waiting for the answer
        pulled += 1
        return {"type": "http.request", "body": parts[pulled - 1], "more_body": pulled < len(parts)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    asyncio.run(asyncio.wait_for(application(scope, receive, send), timeout=60))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), pulled


def test_a_chunked_body_without_content_length_is_cut_off_at_the_limit() -> None:
    chunk = b"x" * 65536
    parts = [chunk] * (TWENTY_MB // len(chunk))
    status, body, pulled = _asgi_post(parts, [(b"transfer-encoding", b"chunked")])
    assert status == 413
    assert body["errors"][0]["code"] == "request_too_large"
    assert pulled * len(chunk) <= settings.REQUEST_BODY_MAX_BYTES + len(chunk)  # stopped reading


def test_a_declared_oversized_body_is_refused_by_the_asgi_layer_before_reading() -> None:
    status, _, pulled = _asgi_post([b"{}"], [(b"content-length", str(TWENTY_MB).encode())])
    assert status == 413
    assert pulled == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls("controlplane.admission_urls")
def test_a_chunked_body_under_the_limit_reaches_the_view_whole() -> None:
    """Without a declared length the WSGI layer would read an empty body; it is handed on with one."""
    chunked = [(b"transfer-encoding", b"chunked")]
    status, body, pulled = _asgi_post([b'{"kind": ', b'"Pod"}'], chunked, ADMISSION)
    assert pulled == 2
    assert status == 400
    assert "Expecting value" not in body["error"]  # the JSON was there (and is not a review)


def test_20k_fault_levels_are_refused_quickly_with_the_cap_named() -> None:
    levels = [f"Level{i}" for i in range(20_000)]
    policy = {
        "platform_mode": True,
        "strategies": ["recover"],
        "decision_rules": [{"match": {"fault_level": levels}, "strategy": "recover"}],
    }
    start = time.process_time()
    result = validate_policy(policy)
    assert time.process_time() - start < 0.5
    [issue] = [i for i in result.errors if i.code == "too_many_items"]
    assert issue.field == "/decision_rules/0/match/fault_level"
    assert str(MAX_LIST_ITEMS) in issue.message and "20000" in issue.message


def test_duplicate_fault_levels_under_the_cap_are_collapsed() -> None:
    levels = ["RestartBusiness", "RestartNPU"] * (MAX_LIST_ITEMS // 2)
    policy = {
        "platform_mode": True,
        "strategies": ["recover"],
        "decision_rules": [{"match": {"fault_level": levels}, "strategy": "recover"}],
    }
    result = validate_policy(policy)
    assert result.errors == ()
    assert result.spec is not None


def test_too_many_strategies_are_refused_with_the_cap_named() -> None:
    result = validate_policy({"strategies": ["recover"] * 20_000})
    [issue] = [i for i in result.errors if i.code == "too_many_items"]
    assert issue.field == "/strategies"
    assert str(MAX_LIST_ITEMS) in issue.message
