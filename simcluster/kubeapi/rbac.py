"""RBAC authorization: every request's attributes checked against the stored RBAC objects.

Ported from the Kubernetes sources, one function per source function:

* :func:`request_attributes` - k8s.io/apiserver pkg/endpoints/request/requestinfo.go
  ``NewRequestInfo`` (verb from method, ``list``/``watch`` for a GET without a name, ``watch`` for
  ``?watch=1``, ``deletecollection``, namespace, resource/name/subresource, non-resource paths, a
  ``metadata.name`` field selector naming the object of a list/watch).
* :meth:`Authorizer.authorize` - kubernetes plugin/pkg/auth/authorizer/rbac/rbac.go ``Authorize``
  and pkg/registry/rbac/validation/rule.go ``VisitRulesFor`` / ``appliesToUser``: ClusterRoleBindings
  apply everywhere, RoleBindings only in their namespace (to a Role there or a ClusterRole);
  a binding to a missing role adds ``RBAC: <role> not found`` to the denial's reason. Members of
  ``system:masters`` are allowed before RBAC runs (the apiserver's privileged-group authorizer).
* :func:`rule_allows` - pkg/apis/rbac/v1/evaluation_helpers.go (``*``, ``*/subresource``,
  ``resourceNames``, ``nonResourceURLs`` with a trailing ``*``).
* :func:`forbidden` - k8s.io/apiserver pkg/endpoints/handlers/responsewriters/errors.go
  ``forbiddenMessage`` + apimachinery ``NewForbidden``.
* :func:`bootstrap_objects` - plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go (the default
  ClusterRoles and bindings a cluster starts with). ``view``/``edit``/``admin`` are stored flattened
  (their core-group rules) because aggregation is not emulated; like the real ones they grant
  nothing on custom resources such as AscendJobs.

Not emulated: RBAC's escalation check on creating roles and bindings (``escalate``/``bind``),
aggregated ClusterRoles, impersonation, the Node authorizer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import errors
from .authn import SA_PREFIX, SYSTEM_MASTERS, UserInfo
from .errors import ApiError
from .resources import CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES
from .store import Store

RBAC_GROUP = "rbac.authorization.k8s.io"
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


@dataclass(frozen=True, slots=True)
class Attributes:
    """authorizer.Attributes: what a request (or a SubjectAccessReview) asks to do."""

    user: UserInfo
    verb: str
    # A resource request names these (empty strings where the request has none)...
    namespace: str
    api_group: str
    resource: str
    subresource: str
    name: str
    # ...a non-resource request (``/healthz``, ``/apis``) only its path.
    path: str = ""
    resource_request: bool = True

    @classmethod
    def non_resource(cls, user: UserInfo, verb: str, path: str) -> Attributes:
        return cls(user, verb, "", "", "", "", "", path=path, resource_request=False)


def _parse_bool(value: str) -> bool:
    # strconv.ParseBool, which the ListOptions parameter codec uses for ``watch``.
    return value in ("1", "t", "T", "TRUE", "true", "True")


def request_attributes(method: str, path: str, query: Any, user: UserInfo) -> Attributes:
    parts = [p for p in path.strip("/").split("/") if p] if path.strip("/") else []
    non_resource = Attributes.non_resource(user, method.lower(), path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    prefix, rest = parts[0], parts[1:]
    group = ""
    if prefix == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    rest = rest[1:]  # the version: RBAC does not look at it
    verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) >= 2 else ""
    subresource = rest[2] if len(rest) >= 3 else ""
    if not name and verb == "get":
        verb = "watch" if _parse_bool(query.get("watch", "")) else "list"
        selector = query.get("fieldSelector") or ""
        exact = _exact_name(selector)
        if exact:
            name = exact
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, namespace, group, resource, subresource, name, path=path)


def _exact_name(selector: str) -> str:
    """``metadata.name=X`` (or ``==``) as the only requirement: fields.Selector.RequiresExactMatch."""
    if not selector or "," in selector:
        return ""
    for op in ("==", "="):
        key, sep, value = selector.partition(op)
        if sep and "!" not in key:
            return (
                value
                if key.strip() == "metadata.name" and "/" not in value and value not in (".", "..")
                else ""
            )
    return ""


# --- rules ----------------------------------------------------------------------------------------


def _strings(rule: dict[str, Any], key: str) -> list[str]:
    value = rule.get(key) or []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def rule_allows(attrs: Attributes, rule: dict[str, Any]) -> bool:
    verbs = _strings(rule, "verbs")
    if not ("*" in verbs or attrs.verb in verbs):
        return False
    if not attrs.resource_request:
        for url in _strings(rule, "nonResourceURLs"):
            if url == "*" or url == attrs.path:
                return True
            if url.endswith("*") and attrs.path.startswith(url.rstrip("*")):
                return True
        return False
    groups = _strings(rule, "apiGroups")
    if not ("*" in groups or attrs.api_group in groups):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resource_ok = False
    for res in _strings(rule, "resources"):
        if res == "*" or res == combined or (attrs.subresource and res == f"*/{attrs.subresource}"):
            resource_ok = True
            break
    if not resource_ok:
        return False
    names = _strings(rule, "resourceNames")
    return not names or attrs.name in names


def _applies_to(user: UserInfo, subject: Any, binding_namespace: str) -> bool:
    if not isinstance(subject, dict):
        return False
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == f"{SA_PREFIX}{namespace}:{name}"
    return False


def _describe_subject(subject: dict[str, Any], binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return f'ServiceAccount "{subject.get("name")}/{ns}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


class Authorizer:
    def __init__(self, store: Store) -> None:
        self.store = store

    def _role_rules(self, role_ref: Any, binding_namespace: str) -> list[dict[str, Any]]:
        """GetRoleReferenceRules; raises LookupError with the lister's not-found message."""
        if not isinstance(role_ref, dict):
            raise LookupError('unsupported role reference kind: ""')
        kind, name = role_ref.get("kind"), str(role_ref.get("name", ""))
        if kind == "Role":
            stored = self.store.get(ROLES, binding_namespace, name)
            what = "role"
        elif kind == "ClusterRole":
            stored = self.store.get(CLUSTERROLES, "", name)
            what = "clusterrole"
        else:
            raise LookupError(f"unsupported role reference kind: {json.dumps(kind)}")
        if stored is None:
            raise LookupError(f'{what}.{RBAC_GROUP} "{name}" not found')
        rules = stored.obj.get("rules") or []
        return [r for r in rules if isinstance(r, dict)]

    def visit_rules(
        self, user: UserInfo, namespace: str
    ) -> Iterator[tuple[str, dict[str, Any] | None, str | None]]:
        """(source description, rule, resolution error) for every rule that applies to ``user``."""
        for stored in self.store.current(CLUSTERROLEBINDINGS, ""):
            binding = stored.obj
            subject = next((s for s in binding.get("subjects") or [] if _applies_to(user, s, "")), None)
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            try:
                rules = self._role_rules(ref, "")
            except LookupError as exc:
                yield "", None, str(exc)
                continue
            source = (
                f'ClusterRoleBinding "{binding["metadata"]["name"]}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {_describe_subject(subject, "")}'
            )
            for rule in rules:
                yield source, rule, None
        if not namespace:
            return
        for stored in self.store.current(ROLEBINDINGS, namespace):
            binding = stored.obj
            subject = next(
                (s for s in binding.get("subjects") or [] if _applies_to(user, s, namespace)), None
            )
            if subject is None:
                continue
            ref = binding.get("roleRef") or {}
            try:
                rules = self._role_rules(ref, namespace)
            except LookupError as exc:
                yield "", None, str(exc)
                continue
            source = (
                f'RoleBinding "{binding["metadata"]["name"]}/{namespace}" of {ref.get("kind")} '
                f'"{ref.get("name")}" to {_describe_subject(subject, namespace)}'
            )
            for rule in rules:
                yield source, rule, None

    def authorize(self, attrs: Attributes) -> Decision:
        if SYSTEM_MASTERS in attrs.user.groups:
            return Decision(True)
        problems: list[str] = []
        for source, rule, problem in self.visit_rules(attrs.user, attrs.namespace):
            if rule is not None and rule_allows(attrs, rule):
                return Decision(True, f"RBAC: allowed by {source}")
            if problem is not None:
                problems.append(problem)
        if not problems:
            return Decision(False)
        # utilerrors.NewAggregate: one error is its message, several are "[a, b]".
        joined = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
        return Decision(False, f"RBAC: {joined}")

    def rules_for(
        self, user: UserInfo, namespace: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        """(resourceRules, nonResourceRules, evaluationError) for a SelfSubjectRulesReview."""
        resource_rules: list[dict[str, Any]] = []
        non_resource_rules: list[dict[str, Any]] = []
        problems: list[str] = []
        for _source, rule, problem in self.visit_rules(user, namespace):
            if problem is not None:
                problems.append(problem)
            if rule is None:
                continue
            if rule.get("resources"):
                info: dict[str, Any] = {"verbs": _strings(rule, "verbs")}
                for key in ("apiGroups", "resources", "resourceNames"):
                    if _strings(rule, key):
                        info[key] = _strings(rule, key)
                resource_rules.append(info)
            if rule.get("nonResourceURLs"):
                non_resource_rules.append(
                    {"verbs": _strings(rule, "verbs"), "nonResourceURLs": _strings(rule, "nonResourceURLs")}
                )
        error = problems[0] if len(problems) == 1 else ("[" + ", ".join(problems) + "]" if problems else "")
        return resource_rules, non_resource_rules, error

    def require(self, attrs: Attributes) -> None:
        decision = self.authorize(attrs)
        if not decision.allowed:
            raise forbidden(attrs, decision.reason)


def _go_quote(value: str) -> str:
    """Go's ``%q`` for the strings that occur here (printable text: JSON's quoting, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def forbidden_message(attrs: Attributes) -> str:
    user = _go_quote(attrs.user.name)
    if not attrs.resource_request:
        return f"User {user} cannot {attrs.verb} path {_go_quote(attrs.path)}"
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    group = _go_quote(attrs.api_group)
    head = f"User {user} cannot {attrs.verb} resource {_go_quote(resource)} in API group {group}"
    if attrs.namespace:
        return f"{head} in the namespace {_go_quote(attrs.namespace)}"
    return f"{head} at the cluster scope"


def forbidden(attrs: Attributes, reason: str = "") -> ApiError:
    message = forbidden_message(attrs)
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
        message = message.replace(char, entity)
    if reason:
        message = f"{message}: {reason}"
    details: dict[str, Any] = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.resource:
        details["kind"] = attrs.resource
    qualified = errors.qualified(attrs.resource, attrs.api_group)
    if not attrs.resource:
        text = f"forbidden: {message}"
    elif attrs.name:
        text = f"{qualified} {_go_quote(attrs.name)} is forbidden: {message}"
    else:
        text = f"{qualified} is forbidden: {message}"
    return ApiError(403, text, reason="Forbidden", details=details)
