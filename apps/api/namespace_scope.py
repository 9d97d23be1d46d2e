"""The namespace a request addresses (``/clusters/{cluster}/namespaces/{namespace}/...``), checked
once for every such route: namespace defaults and namespace presets."""

from __future__ import annotations

from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request

from apps.accounts.selectors import clusters_visible_to, has_role, role_in_namespace
from apps.core.api_errors import field_error
from apps.core.api_inputs import DNS1123_LABEL
from apps.core.numbers import is_ascii_digits
from apps.jobs.models import Cluster


def namespace_scope(request: Request, cluster_ref: str, namespace: str, need: str) -> Cluster:
    """The cluster if the user may see ``namespace`` in it (else 404) with role ``need`` (else 403)."""
    if len(namespace) > 63 or not DNS1123_LABEL.match(namespace):
        raise field_error(
            "namespace",
            "A namespace is a DNS-1123 label: lower-case letters, digits and '-', at most 63.",
            "invalid",
        )
    clusters = clusters_visible_to(request.user)
    cluster = clusters.filter(name=cluster_ref).first()
    if cluster is None and is_ascii_digits(cluster_ref) and len(cluster_ref) <= 18:
        cluster = clusters.filter(pk=int(cluster_ref)).first()
    role = role_in_namespace(request.user, cluster=cluster, namespace=namespace) if cluster else None
    if cluster is None or role is None:
        raise NotFound("No such cluster and namespace (or you may not see them).")
    if not has_role(role, need):
        raise PermissionDenied(
            f"You have the {role} role on namespace {namespace!r} of cluster {cluster.name!r}; "
            f"this needs {need}."
        )
    return cluster
