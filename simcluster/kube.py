"""Thin helpers over the official ``kubernetes`` client shared by the simulated components.

Every simulated component (operator, ClusterD, TaskD) reaches the API emulator only through these
clients, exactly as the real components reach a real API server: over HTTP, with the kubeconfig's
token, so every call is authenticated, authorised and admitted like anyone else's.

The calls a fault makes (Events, reset.json ConfigMaps, pods, PodGroups, job status) go through
``Kube.request``: the client's own connection pool and credentials, but JSON in and out. The
generated client turns every answer into model objects (and ``list_job_pods`` turned them back into
dicts); measured on 2 cores that was most of the ~27 ms of CPU one fault cost the simulator, and
the components only ever wanted the JSON.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Final

import kubernetes
from kubernetes import watch
from kubernetes.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes.client.exceptions import ApiException

from mindcluster import keys as k

log = logging.getLogger(__name__)


POOL_SIZE: Final = 64


def new_api_client(kubeconfig_path: str) -> ApiClient:
    """A fresh client. Its pool keeps up to ``POOL_SIZE`` connections: ClusterD's recovery workers
    (one thread per faulty job) share one client, and with the default pool (5 per core) a storm of
    200 jobs opened and dropped a TCP connection for most requests ("Connection pool is full")."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig_path), client_configuration=configuration)
    configuration.connection_pool_maxsize = POOL_SIZE
    return ApiClient(configuration)


def _json_object(value: object) -> dict[str, Any]:
    """A custom-objects answer: parsed JSON, which the client types as ``object``."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a JSON object from the API server, got {type(value).__name__}")
    return value


def _dict_body(body: dict[str, Any]) -> Any:
    """A plain dict as a request body: the client sends it as it is, though its signatures name the
    model classes (``V1Pod``, ``V1ConfigMap``, ...)."""
    return body


def rfc3339(moment: datetime | None = None) -> str:
    """Kubernetes timestamp format (second precision, Z suffix)."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


_CUSTOM_PATHS: dict[str, tuple[str, str, str]] = {
    "ascendjobs": (k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, k.ASCENDJOB_PLURAL),
    "podgroups": (k.PODGROUP_GROUP, k.PODGROUP_VERSION, k.PODGROUP_PLURAL),
}
MERGE_PATCH: Final = "application/merge-patch+json"


def resource_path(plural: str, namespace: str | None = None, name: str | None = None, sub: str = "") -> str:
    """The REST path of a core (``pods``) or custom (``ascendjobs``, ``podgroups``) resource."""
    if plural in _CUSTOM_PATHS:
        group, version, _ = _CUSTOM_PATHS[plural]
        base = f"/apis/{group}/{version}"
    else:
        base = "/api/v1"
    path = base + (f"/namespaces/{namespace}" if namespace is not None else "") + f"/{plural}"
    if name is not None:
        path += f"/{name}"
    return path + (f"/{sub}" if sub else "")


class Kube:
    """The few API calls the simulated components make, with dict bodies throughout."""

    def __init__(self, kubeconfig_path: str) -> None:
        self.api_client = new_api_client(kubeconfig_path)
        self.core = CoreV1Api(self.api_client)
        self.custom = CustomObjectsApi(self.api_client)
        config = self.api_client.configuration
        self._host = str(config.host).rstrip("/")
        self._headers: dict[str, str] = {"Accept": "application/json", **self.api_client.default_headers}
        for setting in config.auth_settings().values():
            if setting.get("in") == "header" and setting.get("value"):
                self._headers[str(setting["key"])] = str(setting["value"])
        self._pool = self.api_client.rest_client.pool_manager

    def close(self) -> None:
        self.api_client.close()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> Any:
        """One API call with a JSON body and answer; a failure raises the client's ``ApiException``
        (status, reason, body), so callers handle it as they handle the generated calls'."""
        url = self._host + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = self._headers
        data = None
        if body is not None:
            headers = {**headers, "Content-Type": content_type}
            data = json.dumps(body, separators=(",", ":")).encode()
        response = self._pool.request(method, url, body=data, headers=headers, preload_content=True)
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason, body=response.data.decode())
        return json.loads(response.data) if response.data else None

    # --- AscendJobs ---------------------------------------------------------------------------------
    def list_jobs(self, **kwargs: Any) -> Any:
        """AscendJobs in every namespace (see ``_list_custom``)."""
        return self._list_custom(k.ASCENDJOB_GROUP, k.ASCENDJOB_VERSION, k.ASCENDJOB_PLURAL, **kwargs)

    def create_job(self, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"].get("namespace", "default")
        return _json_object(self.request("POST", resource_path("ascendjobs", namespace), body))

    def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("ascendjobs", namespace, name)

    def patch_job_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._merge("ascendjobs", namespace, name, {"status": status}, sub="status")

    # --- PodGroups ----------------------------------------------------------------------------------
    def list_podgroups(self, **kwargs: Any) -> Any:
        """PodGroups in every namespace (see ``_list_custom``)."""
        return self._list_custom(k.PODGROUP_GROUP, k.PODGROUP_VERSION, k.PODGROUP_PLURAL, **kwargs)

    def get_podgroup(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("podgroups", namespace, name)

    def create_podgroup(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return _json_object(self.request("POST", resource_path("podgroups", namespace), body))

    def patch_podgroup(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return _json_object(self._merge("podgroups", namespace, name, patch))

    def patch_podgroup_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._merge("podgroups", namespace, name, {"status": status}, sub="status")

    def delete_podgroup(self, namespace: str, name: str) -> None:
        self._ignore_404(self.request, "DELETE", resource_path("podgroups", namespace, name))

    # --- pods ---------------------------------------------------------------------------------------
    def list_job_pods(self, namespace: str, job_name: str) -> list[dict[str, Any]]:
        listed = self.request(
            "GET", resource_path("pods", namespace), query={"labelSelector": f"job-name={job_name}"}
        )
        items: list[dict[str, Any]] = listed.get("items") or []
        return sorted(items, key=lambda p: int(p["metadata"].get("annotations", {}).get("hccl/rankIndex", 0)))

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("pods", namespace, name)

    def create_pod(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create the pod; returns it as stored (with its uid)."""
        return _json_object(self.request("POST", resource_path("pods", namespace), body))

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Patch a pod's metadata; a pod already gone is not an error (404 ignored)."""
        self._ignore_404(self._merge, "pods", namespace, name, patch)

    def patch_pod_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self._merge("pods", namespace, name, {"status": status}, sub="status")

    def delete_pod(self, namespace: str, name: str) -> None:
        self._ignore_404(self.request, "DELETE", resource_path("pods", namespace, name))

    # --- ConfigMaps, namespaces, events ---------------------------------------------------------------
    def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._get("configmaps", namespace, name)

    def upsert_configmap(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Merge ``data`` into the ConfigMap, or create it when it does not exist.

        The patch goes first: ClusterD rewrites a job's reset.json several times a fault and the
        ConfigMap exists from the first write on, so create-then-patch cost two requests each time."""
        try:
            self._merge("configmaps", namespace, name, {"data": data})
            return
        except ApiException as exc:
            if exc.status != 404:
                raise
        body = {"metadata": {"name": name, "namespace": namespace}, "data": data}
        try:
            self.request("POST", resource_path("configmaps", namespace), body)
        except ApiException as exc:
            if exc.status != 409:  # created by someone else meanwhile: merge into theirs
                raise
            self._merge("configmaps", namespace, name, {"data": data})

    def ensure_namespace(self, name: str) -> None:
        try:
            self.core.create_namespace(_dict_body({"metadata": {"name": name}}))
        except ApiException as exc:
            if exc.status != 409:
                raise

    def event(
        self,
        obj: dict[str, Any],
        reason: str,
        message: str,
        type_: str = "Normal",
        component: str = "ascend-operator",
    ) -> None:
        """Record a Kubernetes Event about ``obj`` (an AscendJob dict)."""
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace", "default")
        now = rfc3339()
        body = {
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", k.ASCENDJOB_API_VERSION),
                "kind": obj.get("kind", k.ASCENDJOB_KIND),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "source": {"component": component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.request("POST", resource_path("events", namespace), body)
        except ApiException as exc:  # events are best-effort, exactly like client-go's recorder
            log.warning("could not record event %s on %s: %s", reason, meta.get("name"), exc.status)

    def list_events(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """Events about the object ``name`` in ``namespace``, oldest first."""
        events = self.core.list_namespaced_event(namespace)
        items = [self.api_client.sanitize_for_serialization(e) for e in events.items]
        mine = [e for e in items if e.get("involvedObject", {}).get("name") == name]
        return sorted(
            mine,
            key=lambda e: _rv(
                e.get("metadata", {}).get("resource_version") or e.get("metadata", {}).get("resourceVersion")
            ),
        )

    # --- helpers ------------------------------------------------------------------------------------
    def _list_custom(self, group: str, version: str, plural: str, **kwargs: Any) -> Any:
        """A custom resource in every namespace (also usable as an ``Informer``/watch list function).

        The list as a dict; under a watch (``_preload_content=False``) the raw streaming response.
        """
        return self.custom.list_cluster_custom_object(group, version, plural, **kwargs)

    def _get(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return _json_object(self.request("GET", resource_path(plural, namespace, name)))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def _merge(self, plural: str, namespace: str, name: str, patch: dict[str, Any], sub: str = "") -> Any:
        path = resource_path(plural, namespace, name, sub)
        return self.request("PATCH", path, patch, content_type=MERGE_PATCH)

    @staticmethod
    def _ignore_404(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except ApiException as exc:
            if exc.status != 404:
                raise


def _rv(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class Informer(threading.Thread):
    """List, then watch from the list's resourceVersion; relist on 410 Gone or any error.

    ``handler(event_type, obj)`` gets ``ADDED`` for every listed object, then watch events.
    Objects are plain dicts (custom-object API) so ``list_fn`` must be a CustomObjectsApi list call.
    """

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., dict[str, Any]],
        handler: Callable[[str, dict], None],
        stop: threading.Event,
        watch_timeout_s: int = 2,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self._list_fn = list_fn
        self._handler = handler
        self._stop_event = stop
        self._watch_timeout_s = watch_timeout_s
        self.synced = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                listed = self._list_fn()
                for obj in listed.get("items", []):
                    self._safe_handle("ADDED", obj)
                self.synced.set()
                resource_version = listed.get("metadata", {}).get("resourceVersion")
                for event_type, obj in self._watch(resource_version):
                    self._safe_handle(event_type, obj)
            except Exception as exc:  # relist after any failure; never let the thread die
                if self._stop_event.is_set():
                    return
                log.debug("%s: relisting after %s", self.name, exc)
                self._stop_event.wait(0.2)

    def _watch(self, resource_version: str | None) -> Iterator[tuple[str, dict[str, Any]]]:
        while not self._stop_event.is_set():
            stream = watch.Watch()
            kwargs: dict[str, Any] = {"timeout_seconds": self._watch_timeout_s, "allow_watch_bookmarks": True}
            if resource_version:
                kwargs["resource_version"] = resource_version
            for event in stream.stream(self._list_fn, **kwargs):
                obj = event.get("object") or {}
                new_rv = obj.get("metadata", {}).get("resourceVersion") if isinstance(obj, dict) else None
                if new_rv:
                    resource_version = new_rv
                if event.get("type") == "BOOKMARK":
                    continue
                yield event["type"], obj
                if self._stop_event.is_set():
                    stream.stop()
                    return

    def _safe_handle(self, event_type: str, obj: dict[str, Any]) -> None:
        try:
            self._handler(event_type, obj)
        except Exception:
            log.exception("%s: handler failed for %s event", self.name, event_type)
