"""The resource types the emulator serves, and the discovery documents describing them.

The official client never reads discovery for typed calls, but ``kubectl``, ``DynamicClient`` and
``kubernetes.utils.create_from_yaml`` do, so the documents mirror what a real apiserver returns for
these groups (including ``pods/status``-style subresource entries).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_STATUS_VERBS = ["get", "patch", "update"]
_CREATE_ONLY = ("create",)
_META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class Subresource:
    """A subresource whose request and answer are another kind (``serviceaccounts/token``)."""

    name: str
    group: str
    version: str
    kind: str
    verbs: tuple[str, ...] = _CREATE_ONLY


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    has_status: bool = False  # status subresource: main writes keep .status, /status writes only .status
    has_generation: bool = False  # metadata.generation tracks .spec changes
    # Fields accepted by ?fieldSelector= in addition to metadata.name / metadata.namespace.
    extra_fields: frozenset[str] = field(default_factory=frozenset)
    # Pods and namespaces answer DELETE with the object, everything else with a Success Status.
    returns_deleted_object: bool = False
    # Built-in types get apiVersion/kind defaulted from the URL; custom resources must carry them.
    builtin: bool = True
    # The verbs discovery lists; review types (SelfSubjectAccessReview...) are create-only and
    # never stored: the server answers them from the request (``stored`` False).
    verbs: tuple[str, ...] = _VERBS
    stored: bool = True
    # Subresources beyond ``status`` (``serviceaccounts/token``), each with its own kind and group.
    subresources: tuple[Subresource, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def selectable_fields(self) -> frozenset[str]:
        return _META_FIELDS | self.extra_fields

    def api_resource(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            doc["shortNames"] = list(self.short_names)
        return doc


NAMESPACES = ResourceType(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    namespaced=False,
    short_names=("ns",),
    has_status=True,
    extra_fields=frozenset({"status.phase"}),
    returns_deleted_object=True,
)
PODS = ResourceType(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    short_names=("po",),
    has_status=True,
    has_generation=True,
    extra_fields=frozenset(
        {
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        }
    ),
    returns_deleted_object=True,
)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", short_names=("cm",))
EVENTS = ResourceType(
    "",
    "v1",
    "events",
    "event",
    "Event",
    short_names=("ev",),
    extra_fields=frozenset(
        {
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
)
# The custom resources (AscendJob, Volcano's PodGroup and Queue), as their CRDs declare them: a
# status subresource, a generation, and apiVersion/kind required in the body (not defaulted).
_CUSTOM: dict[str, Any] = {"has_status": True, "has_generation": True, "builtin": False}
ASCENDJOBS = ResourceType(
    "mindxdl.gitee.com",
    "v1",
    "ascendjobs",
    "ascendjob",
    "AscendJob",
    short_names=("acjob",),
    **_CUSTOM,
)
PODGROUPS = ResourceType(
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    "podgroup",
    "PodGroup",
    short_names=("pg", "podgroup-v1beta1"),
    **_CUSTOM,
)
# Volcano's cluster-scoped queues: the operator checks that the job's queue exists
# (ascend-operator ascendjob_validate.go:81-89); the emulator starts with Volcano's "default".
QUEUES = ResourceType(
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    "queue",
    "Queue",
    namespaced=False,
    short_names=("q", "queue-v1beta1"),
    **_CUSTOM,
)

# Mutating admission webhooks the emulator calls on CREATE, as a real apiserver does (admission.py).
MUTATING_WEBHOOK_CONFIGURATIONS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "mutatingwebhookconfiguration",
    "MutatingWebhookConfiguration",
    namespaced=False,
    has_generation=True,
)

# ServiceAccounts and their TokenRequest subresource (``kubectl create token``): see authn.py.
SERVICEACCOUNTS = ResourceType(
    "",
    "v1",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    short_names=("sa",),
    subresources=(Subresource("token", "authentication.k8s.io", "v1", "TokenRequest"),),
)

# RBAC (rbac.authorization.k8s.io/v1), evaluated on every request by rbac.py.
_RBAC = "rbac.authorization.k8s.io"
ROLES = ResourceType(_RBAC, "v1", "roles", "role", "Role")
ROLEBINDINGS = ResourceType(_RBAC, "v1", "rolebindings", "rolebinding", "RoleBinding")
CLUSTERROLES = ResourceType(_RBAC, "v1", "clusterroles", "clusterrole", "ClusterRole", namespaced=False)
CLUSTERROLEBINDINGS = ResourceType(
    _RBAC, "v1", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", namespaced=False
)

# What deploy/ applies, stored only: no controller acts on them (the deploy rehearsal runs the pods'
# processes itself, tests/support/rehearsal.py). Workloads have .status and a generation, as real ones.
_WORKLOAD: dict[str, Any] = {"has_status": True, "has_generation": True}
SECRETS = ResourceType("", "v1", "secrets", "secret", "Secret", extra_fields=frozenset({"type"}))
SERVICES = ResourceType("", "v1", "services", "service", "Service", short_names=("svc",), has_status=True)
# A Service's ready addresses, written by whoever plays the endpoints controller (the deploy rehearsal,
# for the pods it runs); admission.py resolves a webhook's clientConfig.service through them.
ENDPOINTS = ResourceType("", "v1", "endpoints", "endpoints", "Endpoints", short_names=("ep",))
DEPLOYMENTS = ResourceType(
    "apps", "v1", "deployments", "deployment", "Deployment", short_names=("deploy",), **_WORKLOAD
)
STATEFULSETS = ResourceType(
    "apps", "v1", "statefulsets", "statefulset", "StatefulSet", short_names=("sts",), **_WORKLOAD
)
JOBS = ResourceType("batch", "v1", "jobs", "job", "Job", **_WORKLOAD)
POD_DISRUPTION_BUDGETS = ResourceType(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "poddisruptionbudget",
    "PodDisruptionBudget",
    short_names=("pdb",),
    **_WORKLOAD,
)
_NET = "networking.k8s.io"
NETWORK_POLICIES = ResourceType(
    _NET, "v1", "networkpolicies", "networkpolicy", "NetworkPolicy", short_names=("netpol",)
)
INGRESSES = ResourceType(_NET, "v1", "ingresses", "ingress", "Ingress", short_names=("ing",), has_status=True)
VALIDATING_WEBHOOK_CONFIGURATIONS = ResourceType(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "validatingwebhookconfiguration",
    "ValidatingWebhookConfiguration",
    namespaced=False,
    has_generation=True,
)

# Reviews: answered from the request and the RBAC objects, never stored (``kubectl auth can-i``,
# ``kubectl auth whoami``).
SELF_SUBJECT_ACCESS_REVIEWS = ResourceType(
    "authorization.k8s.io",
    "v1",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    "SelfSubjectAccessReview",
    namespaced=False,
    verbs=_CREATE_ONLY,
    stored=False,
)
SELF_SUBJECT_RULES_REVIEWS = ResourceType(
    "authorization.k8s.io",
    "v1",
    "selfsubjectrulesreviews",
    "selfsubjectrulesreview",
    "SelfSubjectRulesReview",
    namespaced=False,
    verbs=_CREATE_ONLY,
    stored=False,
)
SELF_SUBJECT_REVIEWS = ResourceType(
    "authentication.k8s.io",
    "v1",
    "selfsubjectreviews",
    "selfsubjectreview",
    "SelfSubjectReview",
    namespaced=False,
    verbs=_CREATE_ONLY,
    stored=False,
)

ALL: tuple[ResourceType, ...] = (
    NAMESPACES,
    PODS,
    CONFIGMAPS,
    EVENTS,
    ASCENDJOBS,
    PODGROUPS,
    QUEUES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    SERVICEACCOUNTS,
    ROLES,
    ROLEBINDINGS,
    CLUSTERROLES,
    CLUSTERROLEBINDINGS,
    SECRETS,
    SERVICES,
    ENDPOINTS,
    DEPLOYMENTS,
    STATEFULSETS,
    JOBS,
    POD_DISRUPTION_BUDGETS,
    NETWORK_POLICIES,
    INGRESSES,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    SELF_SUBJECT_REVIEWS,
)

# (group, version) -> plural -> ResourceType; core is group "".
BY_GROUP_VERSION: dict[tuple[str, str], dict[str, ResourceType]] = {}
for _rt in ALL:
    BY_GROUP_VERSION.setdefault((_rt.group, _rt.version), {})[_rt.plural] = _rt


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    return BY_GROUP_VERSION.get((group, version), {}).get(plural)


def groups() -> list[str]:
    return sorted({g for g, _ in BY_GROUP_VERSION if g})


def versions_of(group: str) -> list[str]:
    return [v for g, v in BY_GROUP_VERSION if g == group]


# --- discovery documents ----------------------------------------------------------------------------


def version_info() -> dict[str, Any]:
    return {
        "major": "1",
        "minor": "31",
        "gitVersion": "v1.31.0-simcluster",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2024-08-13T00:00:00Z",
        "goVersion": "go1.22.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def resource_list(group: str, version: str) -> dict[str, Any] | None:
    types = BY_GROUP_VERSION.get((group, version))
    if types is None:
        return None
    resources: list[dict[str, Any]] = []
    for rt in types.values():
        resources.append(rt.api_resource())
        if rt.has_status:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": _STATUS_VERBS,
                }
            )
        for sub in rt.subresources:
            resources.append(
                {
                    "name": f"{rt.plural}/{sub.name}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "group": sub.group,
                    "version": sub.version,
                    "kind": sub.kind,
                    "verbs": list(sub.verbs),
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def api_group(group: str) -> dict[str, Any] | None:
    vers = versions_of(group)
    if not group or not vers:
        return None
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in vers]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def api_group_list() -> dict[str, Any]:
    out = []
    for g in groups():
        doc = api_group(g)
        assert doc is not None
        doc.pop("kind")
        doc.pop("apiVersion")
        out.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}
