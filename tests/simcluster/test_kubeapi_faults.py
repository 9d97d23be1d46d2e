"""Fault injection observed through the official client, plus the write tally."""

from __future__ import annotations

import json
import time

import pytest
import urllib3
from kubernetes import client

from simcluster.kubeapi import FaultInjector, KubeApiEmulator
from tests.support.kubeapi import ACJ, ascendjob


def test_conflict_next_writes(
    faults: FaultInjector, custom: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j"))
    faults.conflict_next_writes(2, resource="ascendjobs")
    core.create_namespaced_config_map(ns, {"metadata": {"name": "unaffected"}})  # other plural: not counted
    codes = []
    for i in range(3):
        try:
            custom.patch_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j", {"spec": {"replicas": i + 5}})
            codes.append(200)
        except client.ApiException as exc:
            body = json.loads(exc.body)
            assert body["reason"] == "Conflict" and "the object has been modified" in body["message"]
            codes.append(exc.status)
    assert codes == [409, 409, 200]
    assert custom.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j")["spec"]["replicas"] == 7


def test_unavailable_window(
    faults: FaultInjector, core: client.CoreV1Api, api_client: client.ApiClient, ns: str
) -> None:
    faults.unavailable_for(0.5)
    with pytest.raises(client.ApiException) as exc:
        core.list_namespaced_pod(ns)
    assert exc.value.status == 503 and json.loads(exc.value.body)["reason"] == "ServiceUnavailable"
    assert client.VersionApi(api_client).get_code().major == "1"  # /version is exempt
    time.sleep(0.6)
    core.list_namespaced_pod(ns)


def test_throttle_with_retry_after(faults: FaultInjector, core: client.CoreV1Api, ns: str) -> None:
    faults.throttle_next(1, retry_after=3)
    # POST is not retried by urllib3, so the 429 surfaces with its Retry-After header.
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    assert exc.value.status == 429 and exc.value.headers["Retry-After"] == "3"
    body = json.loads(exc.value.body)
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 3
    # urllib3's default Retry honours Retry-After on 429 for idempotent GETs: sleeps, then succeeds.
    faults.throttle_next(1, retry_after=1)
    t0 = time.monotonic()
    core.list_namespaced_pod(ns)
    assert time.monotonic() - t0 >= 0.9


def test_slow(faults: FaultInjector, core: client.CoreV1Api, ns: str) -> None:
    faults.slow(0.3, count=1)
    t0 = time.monotonic()
    core.list_namespaced_pod(ns)
    assert time.monotonic() - t0 >= 0.3
    t0 = time.monotonic()
    core.list_namespaced_pod(ns)
    assert time.monotonic() - t0 < 0.25


def test_drop_connection(faults: FaultInjector, core: client.CoreV1Api, ns: str) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    faults.drop_next(1)
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.patch_namespaced_config_map("cm", ns, {"data": {"a": "b"}})
    assert core.read_namespaced_config_map("cm", ns).data is None  # nothing was applied
    faults.drop_next(10)  # GETs are retried by urllib3 (3 retries) before giving up
    with pytest.raises(urllib3.exceptions.HTTPError):
        core.read_namespaced_config_map("cm", ns)
    faults.clear()
    core.read_namespaced_config_map("cm", ns)


@pytest.mark.parametrize(("status", "reason"), [(500, "InternalError"), (403, "Forbidden"), (422, "Invalid")])
def test_fail_next(faults: FaultInjector, core: client.CoreV1Api, ns: str, status: int, reason: str) -> None:
    faults.fail_next(1, status=status)
    core.list_namespaced_config_map(ns)  # reads are not affected
    with pytest.raises(client.ApiException) as exc:
        core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})
    assert exc.value.status == status and json.loads(exc.value.body)["reason"] == reason
    core.create_namespaced_config_map(ns, {"metadata": {"name": "cm"}})


def test_faults_over_http(
    emulator: KubeApiEmulator, faults: FaultInjector, core: client.CoreV1Api, ns: str
) -> None:
    http = urllib3.PoolManager()
    resp = http.request(
        "POST", f"{emulator.url}/_sim/faults", body=json.dumps({"action": "throttle_next", "count": 2})
    )
    assert resp.status == 200 and json.loads(resp.data)["throttle_next"] == 2
    resp = http.request("POST", f"{emulator.url}/_sim/faults", body=json.dumps({"action": "explode"}))
    assert resp.status == 400 and json.loads(resp.data)["kind"] == "Status"
    assert json.loads(http.request("GET", f"{emulator.url}/_sim/faults").data)["throttle_next"] == 2
    assert http.request("DELETE", f"{emulator.url}/_sim/faults").status == 200
    core.list_namespaced_pod(ns)  # not throttled anymore


def test_write_tally(emulator: KubeApiEmulator, custom: client.CustomObjectsApi, ns: str) -> None:
    for name in ("a", "b"):
        custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob(name))
    custom.patch_namespaced_custom_object(*ACJ, ns, "ascendjobs", "a", {"spec": {"replicas": 3}})
    custom.patch_namespaced_custom_object_status(
        *ACJ, ns, "ascendjobs", "a", {"status": {"phase": "Running"}}
    )
    stats = emulator.stats
    assert stats.count("PATCH", "ascendjobs", ns, "a") == 1
    assert stats.count("PATCH", "ascendjobs", ns, "b") == 0
    assert stats.count("PATCH", "ascendjobs/status", ns, "a") == 1
    assert stats.count("POST", "ascendjobs", ns) == 2
    assert emulator.faults.committed.count("POST", "ascendjobs", ns, "b") == 1
