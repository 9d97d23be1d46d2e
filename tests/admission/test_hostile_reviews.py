"""Issue #24 item 3: hostile AdmissionReview bodies over the real webhook (TLS, the API server's
client certificate, the admission process's URLconf and body limit): no answer is a server error.

Bodies are built to reach deep: a registered cluster with a namespace default, so a well-typed review
goes through the merge, validation, rendering and the pending-admission write.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from apps.admission.services import namespace_default_set
from apps.audit.actors import Actor
from apps.jobs.models import Cluster
from mindcluster import keys as k
from tests.support.admission import DEFAULT_SPEC
from tests.support.admission_tls import AdmissionTls

pytestmark = pytest.mark.django_db(transaction=True)

_TEXT = st.text(max_size=40) | st.sampled_from(["", "\x00", "²", "\ud800x", "a" * 300, "../..", "team-a"])
_SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT
_JSON = st.recursive(
    _SCALAR,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_TEXT, children, max_size=4),
    max_leaves=25,
)
_KEYS = st.sampled_from(
    [
        k.ANNOTATION_RECOVER_STRATEGY,
        k.ANNOTATION_POLICY_REVISION,
        k.LABEL_FAULT_SCHEDULING,
        k.LABEL_FAULT_RETRY_TIMES,
        k.LABEL_POD_RESCHEDULING,
        "recovery.mindcluster.io/preset",
        "recovery.mindcluster.io/admission-uid",
        "recovery.mindcluster.io/release",
    ]
)
_STRING_MAP = st.dictionaries(_KEYS | _TEXT, _TEXT, max_size=6)


@st.composite
def reviews(draw: st.DrawFn) -> bytes:
    kind = draw(
        st.just({"group": k.ASCENDJOB_GROUP, "version": k.ASCENDJOB_VERSION, "kind": k.ASCENDJOB_KIND})
        | _JSON
    )
    metadata = draw(
        st.fixed_dictionaries(
            {"name": _TEXT, "namespace": _TEXT},
            optional={
                "annotations": _STRING_MAP | _JSON,
                "labels": _STRING_MAP | _JSON,
                "generateName": _TEXT,
            },
        )
        | _JSON
    )
    obj = {
        "apiVersion": f"{k.ASCENDJOB_GROUP}/v1",
        "kind": "AscendJob",
        "metadata": metadata,
        "spec": draw(_JSON),
    }
    request: dict[str, Any] = {
        "uid": draw(st.uuids().map(str) | _TEXT | _JSON),
        "kind": kind,
        "operation": draw(st.just("CREATE") | _JSON),
        "namespace": draw(st.just("hostile") | _JSON),
        "object": draw(st.just(obj) | _JSON),
        "dryRun": draw(st.booleans() | _JSON),
    }
    body: Any = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    body = draw(st.just(body) | _JSON)
    raw = json.dumps(body).encode()
    mangle = draw(st.sampled_from(["none", "truncate", "bad-utf8", "deep"]))
    if mangle == "truncate":
        raw = raw[: draw(st.integers(0, len(raw)))]
    elif mangle == "bad-utf8":
        raw = raw[:10] + b"\xff\xfe" + raw[10:]
    elif mangle == "deep":
        raw = b'{"request": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    return raw


class _Caller:
    """One keep-alive HTTPS connection with the API server's certificate, reopened when closed."""

    def __init__(self, url: str, tls: AdmissionTls) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "", parts.port
        self.context = ssl.create_default_context(cafile=str(tls.certs.server_ca.cert))
        self.context.load_cert_chain(str(tls.certs.client.cert), str(tls.certs.client.key))
        self.conn: http.client.HTTPSConnection | None = None

    def post(self, body: bytes) -> int:
        for _ in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(
                    self.host, self.port, context=self.context, timeout=30
                )
            try:
                self.conn.request(
                    "POST",
                    "/admission/ascendjobs/?cluster=hostile",
                    body,
                    {"Content-Type": "application/json"},
                )
                response = self.conn.getresponse()
                response.read()
                return response.status
            except (http.client.HTTPException, ConnectionError):
                self.conn.close()
                self.conn = None
        raise AssertionError("the webhook closed the connection twice")


@pytest.mark.slow(seconds=60)
def test_hostile_reviews_never_get_a_server_error(webhook_url: str, admission_tls: AdmissionTls) -> None:
    cluster = Cluster.objects.create(name="hostile")
    namespace_default_set(cluster=cluster, namespace="hostile", spec=DEFAULT_SPEC, actor=Actor(name="t"))
    caller = _Caller(webhook_url, admission_tls)
    statuses: dict[int, int] = {}

    @given(body=reviews())
    @hypothesis_settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    def check(body: bytes) -> None:
        status = caller.post(body)
        statuses[status] = statuses.get(status, 0) + 1
        assert status < 500, body[:300]

    check()
    assert statuses.get(200, 0) > 0 and statuses.get(400, 0) > 0, statuses  # both paths were reached
