"""The RBAC objects a cluster starts with, and the field validation the RBAC registry applies.

Defaults: plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go ``clusterRoles()`` and
``clusterRoleBindings()`` - ``cluster-admin`` (bound to ``system:masters``), ``system:discovery``
and ``system:basic-user`` (bound to ``system:authenticated``), ``system:public-info-viewer``
(authenticated and unauthenticated), and ``view``/``edit``/``admin`` with the rules their
``system:aggregate-to-*`` roles add, restricted to the core and RBAC groups and stored flattened.

Validation: pkg/apis/rbac/validation/validation.go (verbs required, namespaced rules cannot name
non-resource URLs, roleRef kind/apiGroup/name, subjects, roleRef immutable on update).
"""

from __future__ import annotations

import uuid
from typing import Any

from . import errors
from .authn import AUTHENTICATED, SYSTEM_MASTERS, UNAUTHENTICATED
from .resources import CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES, ResourceType

RBAC_GROUP = "rbac.authorization.k8s.io"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _rule(verbs: list[str], groups: list[str], resources: list[str]) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": groups, "resources": resources}


def _url_rule(verbs: list[str], urls: list[str]) -> dict[str, Any]:
    return {"verbs": verbs, "nonResourceURLs": urls}


_VIEW = [
    _rule(
        _READ,
        [""],
        [
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ],
    ),
    _rule(
        _READ,
        [""],
        [
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ],
    ),
    _rule(_READ, [""], ["namespaces"]),
]
_EDIT = [
    *_VIEW,
    _rule(
        _READ,
        [""],
        ["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"],
    ),
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(_WRITE, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
    _rule(
        _WRITE,
        [""],
        [
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "endpoints",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
        ],
    ),
]
_ADMIN = [
    *_EDIT,
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(_READ + _WRITE, [RBAC_GROUP], ["roles", "rolebindings"]),
]
_CLUSTER_ROLES: dict[str, list[dict[str, Any]]] = {
    "cluster-admin": [_rule(["*"], ["*"], ["*"]), _url_rule(["*"], ["*"])],
    "system:discovery": [
        _url_rule(
            ["get"],
            [
                "/livez",
                "/readyz",
                "/healthz",
                "/version",
                "/version/",
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ],
        )
    ],
    "system:basic-user": [
        _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
        _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"]),
    ],
    "system:public-info-viewer": [
        _url_rule(["get"], ["/livez", "/readyz", "/healthz", "/version", "/version/"])
    ],
    "view": _VIEW,
    "edit": _EDIT,
    "admin": _ADMIN,
}
_CLUSTER_ROLE_BINDINGS: dict[str, tuple[str, ...]] = {
    "cluster-admin": (SYSTEM_MASTERS,),
    "system:discovery": (AUTHENTICATED,),
    "system:basic-user": (AUTHENTICATED,),
    "system:public-info-viewer": (AUTHENTICATED, UNAUTHENTICATED),
}


def _meta(name: str, now: str) -> dict[str, Any]:
    return {
        "name": name,
        "uid": str(uuid.uuid4()),
        "creationTimestamp": now,
        "labels": dict(_LABELS),
        "annotations": dict(_ANNOTATIONS),
    }


def bootstrap_objects(now: str) -> list[tuple[ResourceType, dict[str, Any]]]:
    """The default ClusterRoles and ClusterRoleBindings, ready to commit."""
    out: list[tuple[ResourceType, dict[str, Any]]] = []
    for name, rules in _CLUSTER_ROLES.items():
        role = {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRole",
            "metadata": _meta(name, now),
            "rules": rules,
        }
        out.append((CLUSTERROLES, role))
    for name, groups in _CLUSTER_ROLE_BINDINGS.items():
        binding = {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(name, now),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups],
        }
        out.append((CLUSTERROLEBINDINGS, binding))
    return out


# --- validation -------------------------------------------------------------------------------------


def _cause(reason: str, field: str, message: str) -> dict[str, str]:
    return {"reason": reason, "field": field, "message": message}


def _unsupported(field: str, value: Any, supported: tuple[str, ...]) -> dict[str, str]:
    allowed = ", ".join(f'"{s}"' for s in supported)
    return _cause(
        "FieldValueNotSupported", field, f'Unsupported value: "{value}": supported values: {allowed}'
    )


def _rule_causes(rules: Any, namespaced: bool) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(rules, list):
        return causes
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if not isinstance(rule, dict):
            continue
        if not rule.get("verbs"):
            causes.append(
                _cause(
                    "FieldValueRequired",
                    f"{where}.verbs",
                    "Required value: verbs must contain at least one value",
                )
            )
        urls = rule.get("nonResourceURLs") or []
        if urls and namespaced:
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    f"{where}.nonResourceURLs",
                    f"Invalid value: {_go_list(urls)}: namespaced rules cannot apply to non-resource URLs",
                )
            )
        if urls and (rule.get("resources") or rule.get("apiGroups") or rule.get("resourceNames")):
            causes.append(
                _cause(
                    "FieldValueInvalid",
                    f"{where}.nonResourceURLs",
                    f"Invalid value: {_go_list(urls)}: "
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
        if not urls:
            if not rule.get("apiGroups"):
                causes.append(
                    _cause(
                        "FieldValueRequired",
                        f"{where}.apiGroups",
                        "Required value: resource rules must supply at least one api group",
                    )
                )
            if not rule.get("resources"):
                causes.append(
                    _cause(
                        "FieldValueRequired",
                        f"{where}.resources",
                        "Required value: resource rules must supply at least one resource",
                    )
                )
    return causes


def _go_list(values: list[Any]) -> str:
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _binding_causes(obj: dict[str, Any], cluster: bool) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    ref = obj.get("roleRef")
    ref = ref if isinstance(ref, dict) else {}
    if ref.get("apiGroup") != RBAC_GROUP:
        causes.append(_unsupported("roleRef.apiGroup", ref.get("apiGroup", ""), (RBAC_GROUP,)))
    kinds = ("ClusterRole",) if cluster else ("Role", "ClusterRole")
    if ref.get("kind") not in kinds:
        causes.append(_unsupported("roleRef.kind", ref.get("kind", ""), kinds))
    if not ref.get("name"):
        causes.append(_cause("FieldValueRequired", "roleRef.name", "Required value"))
    subjects = obj.get("subjects") or []
    for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
        where = f"subjects[{i}]"
        if not isinstance(subject, dict):
            continue
        kind = subject.get("kind")
        if kind not in ("ServiceAccount", "User", "Group"):
            causes.append(_unsupported(f"{where}.kind", kind or "", ("ServiceAccount", "User", "Group")))
            continue
        if not subject.get("name"):
            causes.append(_cause("FieldValueRequired", f"{where}.name", "Required value"))
        if kind == "ServiceAccount" and cluster and not subject.get("namespace"):
            causes.append(_cause("FieldValueRequired", f"{where}.namespace", "Required value"))
    return causes


def validate(rt: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """422 Invalid for an RBAC object the registry would refuse; other types pass untouched."""
    if rt not in (ROLES, CLUSTERROLES, ROLEBINDINGS, CLUSTERROLEBINDINGS):
        return
    if rt in (ROLES, CLUSTERROLES):
        causes = _rule_causes(obj.get("rules"), rt is ROLES)
    else:
        causes = _binding_causes(obj, rt is CLUSTERROLEBINDINGS)
        if old is not None and old.get("roleRef") != obj.get("roleRef"):
            causes.append(
                _cause("FieldValueInvalid", "roleRef", "Invalid value: roleRef: cannot change roleRef")
            )
    if causes:
        name = (obj.get("metadata") or {}).get("name", "")
        raise errors.invalid(rt.kind, rt.group, name, causes)
