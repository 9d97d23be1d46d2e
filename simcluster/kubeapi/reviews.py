"""Self reviews, answered from the request and the RBAC objects and never stored.

* ``authorization.k8s.io/v1`` SelfSubjectAccessReview - ``kubectl auth can-i VERB RESOURCE``;
  pkg/registry/authorization/selfsubjectaccessreview/rest.go builds the attributes from
  ``spec.resourceAttributes`` or ``spec.nonResourceAttributes`` (exactly one) and the caller.
* ``authorization.k8s.io/v1`` SelfSubjectRulesReview - ``kubectl auth can-i --list``.
* ``authentication.k8s.io/v1`` SelfSubjectReview - ``kubectl auth whoami``.
"""

from __future__ import annotations

from typing import Any

from . import errors
from .authn import UserInfo
from .rbac import Attributes, Authorizer
from .resources import (
    SELF_SUBJECT_ACCESS_REVIEWS,
    SELF_SUBJECT_REVIEWS,
    SELF_SUBJECT_RULES_REVIEWS,
    ResourceType,
)

_REVIEW_META = {"creationTimestamp": None}


def _spec(body: dict[str, Any]) -> dict[str, Any]:
    spec = body.get("spec")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise errors.bad_request("json: cannot unmarshal spec into Go struct field of type object")
    return spec


def _str(section: dict[str, Any], key: str) -> str:
    value = section.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise errors.bad_request(
            f"json: cannot unmarshal {type(value).__name__} into Go struct field {key} of type string"
        )
    return value


def access_review(authorizer: Authorizer, user: UserInfo, body: dict[str, Any]) -> dict[str, Any]:
    spec = _spec(body)
    res, non_res = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(res) == bool(non_res):
        raise errors.invalid(
            "SelfSubjectAccessReview",
            "authorization.k8s.io",
            "",
            [
                {
                    "reason": "FieldValueInvalid",
                    "field": "spec.resourceAttributes",
                    "message": 'Invalid value: "null": exactly one of nonResourceAttributes or '
                    "resourceAttributes must be specified",
                }
            ],
        )
    if res:
        if not isinstance(res, dict):
            raise errors.bad_request("spec.resourceAttributes must be an object")
        fields = ("verb", "namespace", "group", "resource", "subresource", "name")
        verb, namespace, group, resource, subresource, name = (_str(res, f) for f in fields)
        attrs = Attributes(user, verb, namespace, group, resource, subresource, name)
    else:
        if not isinstance(non_res, dict):
            raise errors.bad_request("spec.nonResourceAttributes must be an object")
        attrs = Attributes.non_resource(user, _str(non_res, "verb"), _str(non_res, "path"))
    decision = authorizer.authorize(attrs)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return _answer(SELF_SUBJECT_ACCESS_REVIEWS, spec, status)


def rules_review(authorizer: Authorizer, user: UserInfo, body: dict[str, Any]) -> dict[str, Any]:
    spec = _spec(body)
    namespace = _str(spec, "namespace")
    resource_rules, non_resource_rules, problem = authorizer.rules_for(user, namespace)
    status: dict[str, Any] = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": bool(problem),
    }
    if problem:
        status["evaluationError"] = problem
    return _answer(SELF_SUBJECT_RULES_REVIEWS, spec, status)


def self_review(user: UserInfo) -> dict[str, Any]:
    return _answer(SELF_SUBJECT_REVIEWS, None, {"userInfo": user.as_json()})


def _answer(rt: ResourceType, spec: dict[str, Any] | None, status: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": dict(_REVIEW_META)}
    if spec is not None:
        out["spec"] = spec
    out["status"] = status
    return out


def answer(rt: ResourceType, authorizer: Authorizer, user: UserInfo, body: dict[str, Any]) -> dict[str, Any]:
    """The review of kind ``rt`` for ``user`` (the server has checked the body's apiVersion/kind)."""
    if rt is SELF_SUBJECT_ACCESS_REVIEWS:
        return access_review(authorizer, user, body)
    if rt is SELF_SUBJECT_RULES_REVIEWS:
        return rules_review(authorizer, user, body)
    if rt is SELF_SUBJECT_REVIEWS:
        return self_review(user)
    raise errors.method_not_allowed()
