"""The Kubernetes adapter: the only module that imports the ``kubernetes`` client.

Functions take a ``ClusterRef`` (plain data, not a model) and return plain dicts. Every failure
becomes a ``ClusterError`` that says whether retrying can help, with ``Retry-After`` when the
server sent one.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from apps.cluster.errors import ClusterError
from mindcluster import keys as c

FIELD_MANAGER = "mindcluster-recovery-control-plane"
MERGE_PATCH = "application/merge-patch+json"
# Connect / read timeouts for single calls; watches set their own.
REQUEST_TIMEOUT = (5.0, 20.0)
# The first item of every watch call: the server answered it (status and headers, flushed by
# kube-apiserver before any event: staging/src/k8s.io/apiserver/pkg/endpoints/handlers/watch.go,
# WatchServer.HandleHTTP), so the changes since the version asked for are arriving now.
OPENED = "OPENED"
_PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 405, 406, 410, 413, 415, 422})


@dataclass(frozen=True)
class ClusterRef:
    """How to reach one cluster: a kubeconfig file and context, or this process's own credentials.

    ``in_cluster`` (the local cluster, the one the control plane runs in) means "whatever identity
    this process has": every process of an install calls the API with its own ServiceAccount, never
    with a path another process registered (see ``load_credentials``).
    """

    name: str
    kubeconfig_path: str = ""
    context: str = ""
    in_cluster: bool = False


_clients: dict[ClusterRef, k8s.ApiClient] = {}
_clients_lock = threading.Lock()


def api_client(ref: ClusterRef) -> k8s.ApiClient:
    """A cached ApiClient per cluster (the pool is thread-safe; the client is reused)."""
    with _clients_lock:
        existing = _clients.get(ref)
        if existing is not None:
            return existing
        configuration = k8s.Configuration()
        try:
            load_credentials(ref, configuration)
            # Retries are ours (budget, backoff, Retry-After, the user-visible attempt count): urllib3
            # hands every HTTP answer straight back. It may only retry once at the connection level:
            # a pooled keep-alive socket the server already closed, which urllib3 retries for reads
            # and idempotent methods only (a PATCH that may have been sent is never repeated here).
            configuration.retries = urllib3.Retry(
                total=1,
                connect=1,
                read=1,
                status=0,
                other=0,
                redirect=0,
                respect_retry_after_header=False,
                raise_on_status=False,
            )
            created = k8s.ApiClient(configuration)
        except (ConfigException, OSError, TypeError, ValueError) as exc:
            raise ClusterError(
                f"cluster {ref.name!r}: cannot load its kubeconfig ({exc})", permanent=True
            ) from exc
        _clients[ref] = created
        return created


def load_credentials(ref: ClusterRef, configuration: k8s.Configuration) -> None:
    """Fill ``configuration`` with the server and identity ``ref`` names: the one place that decides.

    A named kubeconfig file (a remote cluster) is that file. The local cluster (``in_cluster``, or no
    path) is this process's own credentials: in a pod (``KUBERNETES_SERVICE_HOST`` set, as the kubelet
    does) the mounted ServiceAccount token; elsewhere the process's ``KUBECONFIG`` (or
    ``~/.kube/config``), as kubectl would. So web, worker and decider each act as their own
    ServiceAccount even though the ingester registered the row.
    """
    if ref.kubeconfig_path and not ref.in_cluster:
        k8s_config.load_kube_config(
            config_file=ref.kubeconfig_path,
            context=ref.context or None,
            client_configuration=configuration,
            persist_config=False,
        )
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        k8s_config.load_kube_config(
            # Read now: the client's own default is $KUBECONFIG as it was when it was imported.
            config_file=os.environ.get("KUBECONFIG") or None,
            context=ref.context or None,
            client_configuration=configuration,
            persist_config=False,
        )


def forget_client(ref: ClusterRef) -> None:
    """Drop the cached client (after a kubeconfig change)."""
    with _clients_lock:
        _clients.pop(ref, None)


def _translate(exc: Exception, what: str) -> ClusterError:
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        headers = exc.headers or {}
        retry_after: float | None = None
        raw = headers.get("Retry-After") if hasattr(headers, "get") else None
        if raw:
            try:
                retry_after = float(raw)
            except ValueError:
                retry_after = None
        reason, message = _status_text(exc)
        return ClusterError(
            f"{what}: {status} {reason or exc.reason}: {message}".rstrip(": "),
            permanent=status in _PERMANENT_STATUSES,
            status=status,
            retry_after=retry_after,
            reason=reason,
        )
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return ClusterError(f"{what}: cluster unreachable ({exc.__class__.__name__}: {exc})", permanent=False)
    return ClusterError(f"{what}: {exc.__class__.__name__}: {exc}", permanent=False)


def _status_text(exc: ApiException) -> tuple[str, str]:

    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        return "", str(exc.body or "")[:200]
    if not isinstance(body, dict):
        return "", ""
    return str(body.get("reason", "")), str(body.get("message", ""))[:300]


def _call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, _request_timeout=REQUEST_TIMEOUT, **kwargs)
    except ClusterError:
        raise
    except Exception as exc:  # every client failure is translated, none escapes raw
        raise _translate(exc, what) from exc


def _call_json(what: str, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``_call`` answered as plain JSON: no model objects built (a list of Events is thousands)."""
    response = _call(what, fn, *args, _preload_content=False, **kwargs)
    try:
        body = json.loads(response.data or b"{}")
    except ValueError as exc:
        raise ClusterError(f"{what}: the API server sent invalid JSON ({exc})", permanent=False) from exc
    finally:
        response.release_conn()
    return body if isinstance(body, dict) else {}


def _custom(ref: ClusterRef) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(api_client(ref))


def _core(ref: ClusterRef) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api_client(ref))


def _to_dict(ref: ClusterRef, obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return obj
    return dict(api_client(ref).sanitize_for_serialization(obj))


# --- AscendJobs and PodGroups ------------------------------------------------------------------------
@dataclass(frozen=True)
class _CustomKind:
    """Where a custom resource lives in the API: its kind (for error messages), group, version, plural."""

    kind: str
    group: str
    version: str
    plural: str


_ASCENDJOB = _CustomKind("AscendJob", c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, c.ASCENDJOB_PLURAL)
_PODGROUP = _CustomKind("PodGroup", c.PODGROUP_GROUP, c.PODGROUP_VERSION, c.PODGROUP_PLURAL)


def _get_custom(ref: ClusterRef, kind: _CustomKind, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        _call(
            f"get {kind.kind} {namespace}/{name}",
            _custom(ref).get_namespaced_custom_object,
            kind.group,
            kind.version,
            namespace,
            kind.plural,
            name,
        )
    )


def _merge_patch_custom(
    ref: ClusterRef, kind: _CustomKind, namespace: str, name: str, body: dict[str, Any]
) -> dict[str, Any]:
    return dict(
        _call(
            f"patch {kind.kind} {namespace}/{name}",
            _custom(ref).patch_namespaced_custom_object,
            kind.group,
            kind.version,
            namespace,
            kind.plural,
            name,
            body,
            field_manager=FIELD_MANAGER,
            _content_type=MERGE_PATCH,
        )
    )


def get_ascendjob(ref: ClusterRef, namespace: str, name: str) -> dict[str, Any]:
    return _get_custom(ref, _ASCENDJOB, namespace, name)


def patch_ascendjob(ref: ClusterRef, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch; put ``metadata.resourceVersion`` in ``body`` to make it conditional."""
    return _merge_patch_custom(ref, _ASCENDJOB, namespace, name, body)


def create_ascendjob(ref: ClusterRef, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(
        _call(
            f"create AscendJob {namespace}/{(body.get('metadata') or {}).get('name', '')}",
            _custom(ref).create_namespaced_custom_object,
            c.ASCENDJOB_GROUP,
            c.ASCENDJOB_VERSION,
            namespace,
            c.ASCENDJOB_PLURAL,
            body,
            field_manager=FIELD_MANAGER,
        )
    )


def delete_ascendjob(ref: ClusterRef, namespace: str, name: str, uid: str) -> None:
    """Delete exactly this incarnation (``preconditions.uid``), its dependents in the background."""
    _call(
        f"delete AscendJob {namespace}/{name}",
        _custom(ref).delete_namespaced_custom_object,
        c.ASCENDJOB_GROUP,
        c.ASCENDJOB_VERSION,
        namespace,
        c.ASCENDJOB_PLURAL,
        name,
        body={"preconditions": {"uid": uid}, "propagationPolicy": "Background"},
    )


def label_namespace(ref: ClusterRef, name: str, labels: dict[str, str]) -> None:
    """Merge ``labels`` into namespace ``name``, creating it when missing."""
    core = _core(ref)
    try:
        _call(f"label namespace {name}", core.patch_namespace, name, {"metadata": {"labels": labels}})
    except ClusterError as err:
        if not err.not_found:
            raise
        _call(
            f"create namespace {name}", core.create_namespace, {"metadata": {"name": name, "labels": labels}}
        )


def apply_mutating_webhook(ref: ClusterRef, body: dict[str, Any]) -> dict[str, Any]:
    """Create or replace a ``MutatingWebhookConfiguration`` (cluster-scoped) by name."""
    api = k8s.AdmissionregistrationV1Api(api_client(ref))
    name = body["metadata"]["name"]
    try:
        live = _call(
            f"get MutatingWebhookConfiguration {name}", api.read_mutating_webhook_configuration, name
        )
    except ClusterError as err:
        if not err.not_found:
            raise
        created = _call(
            f"create MutatingWebhookConfiguration {name}", api.create_mutating_webhook_configuration, body
        )
        return _to_dict(ref, created)
    body = {**body, "metadata": {**body["metadata"], "resourceVersion": live.metadata.resource_version}}
    replaced = _call(
        f"replace MutatingWebhookConfiguration {name}", api.replace_mutating_webhook_configuration, name, body
    )
    return _to_dict(ref, replaced)


def list_all_ascendjobs(ref: ClusterRef, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Every AscendJob (following ``continue``) and the list's resourceVersion to watch from."""
    return list_resource(ref, "ascendjobs", namespace=namespace)


def podgroup_name(job_name: str, job_uid: str) -> str:
    return f"{job_name}-{job_uid}"


def get_podgroup(ref: ClusterRef, namespace: str, name: str) -> dict[str, Any]:
    return _get_custom(ref, _PODGROUP, namespace, name)


def patch_podgroup(ref: ClusterRef, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """JSON merge patch, like ``patch_ascendjob``."""
    return _merge_patch_custom(ref, _PODGROUP, namespace, name, body)


# --- ConfigMaps ------------------------------------------------------------------------------------
def get_configmap(ref: ClusterRef, namespace: str, name: str) -> dict[str, Any]:
    obj = _call(f"get ConfigMap {namespace}/{name}", _core(ref).read_namespaced_config_map, name, namespace)
    return _to_dict(ref, obj)


def create_configmap(ref: ClusterRef, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("metadata", {}).get("name", "?")
    obj = _call(
        f"create ConfigMap {namespace}/{name}",
        _core(ref).create_namespaced_config_map,
        namespace,
        body,
        field_manager=FIELD_MANAGER,
    )
    return _to_dict(ref, obj)


def replace_configmap(ref: ClusterRef, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
    """PUT; ``metadata.resourceVersion`` in ``body`` makes it conditional (409 when stale)."""
    obj = _call(
        f"update ConfigMap {namespace}/{name}",
        _core(ref).replace_namespaced_config_map,
        name,
        namespace,
        body,
        field_manager=FIELD_MANAGER,
    )
    return _to_dict(ref, obj)


def delete_configmap(ref: ClusterRef, namespace: str, name: str, resource_version: str) -> None:
    body = {"preconditions": {"resourceVersion": resource_version}}
    _call(
        f"delete ConfigMap {namespace}/{name}",
        _core(ref).delete_namespaced_config_map,
        name,
        namespace,
        body=body,
    )


# --- health and watches ----------------------------------------------------------------------------
def server_version(ref: ClusterRef) -> str:
    info = _call("get version", k8s.VersionApi(api_client(ref)).get_code)
    data = _to_dict(ref, info)
    return str(data.get("gitVersion", "unknown"))


def list_all_podgroups(ref: ClusterRef, namespace: str | None = None) -> tuple[list[dict[str, Any]], str]:
    """Every PodGroup (following ``continue``) and the list's resourceVersion to watch from."""
    return list_resource(ref, "podgroups", namespace=namespace)


# --- ingester: list and watch PodGroups, ConfigMaps and Events ------------------------------------
# One generic pair over the resources the event ingester follows. Objects come back as plain dicts
# (the API's camelCase JSON), lists with their resourceVersion, watches as (type, object) pairs
# where type is ADDED / MODIFIED / DELETED / BOOKMARK and ``ClusterError(status=410)`` means relist.
WATCHED_RESOURCES = ("ascendjobs", "podgroups", "configmaps", "events")


def _list_call(ref: ClusterRef, resource: str, namespace: str | None) -> tuple[Any, tuple[Any, ...]]:
    if resource in ("ascendjobs", "podgroups"):
        api = _custom(ref)
        group, version, plural = (
            (c.ASCENDJOB_GROUP, c.ASCENDJOB_VERSION, c.ASCENDJOB_PLURAL)
            if resource == "ascendjobs"
            else (c.PODGROUP_GROUP, c.PODGROUP_VERSION, c.PODGROUP_PLURAL)
        )
        if namespace:
            return api.list_namespaced_custom_object, (group, version, namespace, plural)
        return api.list_cluster_custom_object, (group, version, plural)
    core = _core(ref)
    if resource == "configmaps":
        if namespace:
            return core.list_namespaced_config_map, (namespace,)
        return core.list_config_map_for_all_namespaces, ()
    if resource == "events":
        if namespace:
            return core.list_namespaced_event, (namespace,)
        return core.list_event_for_all_namespaces, ()
    raise ValueError(f"unknown resource {resource!r}; expected one of {WATCHED_RESOURCES}")


def list_resource(
    ref: ClusterRef, resource: str, *, namespace: str | None = None, field_selector: str = ""
) -> tuple[list[dict[str, Any]], str]:
    """Every object of ``resource`` (following ``continue``) and the resourceVersion to watch from."""
    fn, args = _list_call(ref, resource, namespace)
    items: list[dict[str, Any]] = []
    token: str | None = None
    where = f"{resource} in {namespace or 'all namespaces'}"
    while True:
        kwargs: dict[str, Any] = {"limit": 500}
        if token:
            kwargs["_continue"] = token
        if field_selector:
            kwargs["field_selector"] = field_selector
        page = _call_json(f"list {where}", fn, *args, **kwargs)
        items.extend(page.get("items") or [])
        meta = page.get("metadata") or {}
        token = meta.get("continue") or None
        if not token:
            return items, str(meta.get("resourceVersion", ""))


def current_resource_version(ref: ClusterRef, resource: str, *, namespace: str | None = None) -> str:
    """The API server's current resourceVersion, from a one-item consistent list of ``resource``.

    A list without ``resourceVersion`` is read from etcd at its latest revision, and etcd's revision
    is one counter across every resource: the ingester uses it to place a ClusterD signal among
    the watch events the cluster wrote before it.
    """
    fn, args = _list_call(ref, resource, namespace)
    page = _call_json(f"list {resource}", fn, *args, limit=1)
    return str((page.get("metadata") or {}).get("resourceVersion", ""))


def watch_resource(
    ref: ClusterRef,
    resource: str,
    *,
    resource_version: str,
    namespace: str | None = None,
    field_selector: str = "",
    timeout_seconds: int = 60,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(type, object)`` from one watch call, bookmarks included (they only advance the rv),
    and first ``(OPENED, {})`` once the server has answered the call (its status and headers): a watch
    from a resourceVersion gets the changes since that version first, so from then on the backlog is
    arriving (kube-apiserver's watch handler flushes the headers before it sends any event).

    The stream's lines are decoded as plain JSON: the client's own ``Watch`` would also build its
    model objects for core resources (Events, ConfigMaps) and re-encode custom ones, which cost most
    of a watch thread's CPU in a fault storm (issue #27) for objects used as dicts anyway. An
    ``ERROR`` line (410 Gone and the like) ends the call as the ``ApiException`` it stands for.
    """
    fn, args = _list_call(ref, resource, namespace)
    kwargs: dict[str, Any] = {
        "watch": True,
        "resource_version": resource_version,
        "timeout_seconds": timeout_seconds,
        "allow_watch_bookmarks": True,
        "_preload_content": False,
        # Connect within the usual time; the read waits out the server's own timeout.
        "_request_timeout": (REQUEST_TIMEOUT[0], timeout_seconds + REQUEST_TIMEOUT[1]),
    }
    if field_selector:
        kwargs["field_selector"] = field_selector
    response: Any = None
    try:
        response = fn(*args, **kwargs)
        yield OPENED, {}
        for line in k8s_watch.watch.iter_resp_lines(response):
            if not line or line.isspace():
                continue
            event = json.loads(line)
            event_type, obj = str(event.get("type", "")), event.get("object")
            if event_type == "ERROR":
                status = obj if isinstance(obj, dict) else {}
                raise ApiException(
                    status=int(status.get("code") or 500),
                    reason=f"{status.get('reason', '')}: {status.get('message', '')}",
                )
            yield event_type, obj if isinstance(obj, dict) else {}
    except ClusterError:
        raise
    except Exception as exc:
        raise _translate(exc, f"watch {resource}") from exc
    finally:
        if response is not None:
            response.close()
            response.release_conn()
