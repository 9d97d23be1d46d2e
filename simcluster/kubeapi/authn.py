"""Who is asking: bearer tokens → users, as kube-apiserver's authenticator chain decides it.

* The static admin token (``ADMIN_TOKEN``, in every kubeconfig the emulator writes) is the user
  ``simcluster-admin`` in group ``system:masters`` - what a kubeadm admin.conf certificate is.
* ServiceAccount tokens come from the TokenRequest API (``POST .../serviceaccounts/NAME/token``,
  what ``kubectl create token`` and the kubelet's projected volumes call). They are **opaque random
  strings** held in memory by the server (a real cluster signs JWTs; nothing in this project reads
  the claims, and an opaque token cannot be forged or decoded). A token names
  ``system:serviceaccount:NS:NAME`` with groups ``system:serviceaccounts``,
  ``system:serviceaccounts:NS`` and ``system:authenticated``; it stops working when it expires, when
  its ServiceAccount is deleted (or deleted and recreated: the UID is checked), or when the Pod it
  is bound to goes - as the apiserver's service-account token authenticator checks.
* No ``Authorization: Bearer`` header on the HTTPS port: ``system:anonymous`` in
  ``system:unauthenticated`` (``--anonymous-auth=true``, the default). On the plain-HTTP port it is
  ``system:unsecured`` in ``system:masters``: the apiserver's old ``--insecure-port`` (removed in
  1.20), kept because kubectl never sends credentials over plain HTTP and every existing kubeconfig
  and test uses that port. Unlike that port, a token presented over HTTP *is* checked, so a Python
  client with a ServiceAccount's token is held to its RBAC on either port.
* A bearer token that authenticates nobody is 401, never anonymous (k8s.io/apiserver
  pkg/authentication/request/bearertoken/bearertoken.go: an unknown token is ``invalidToken``;
  kubernetes pkg/kubeapiserver/authenticator/config.go wraps the chain in ``union.NewFailOnError``
  before the anonymous authenticator).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from . import errors
from .errors import ApiError
from .resources import PODS, SERVICEACCOUNTS
from .store import Store

ADMIN_TOKEN = "simcluster-token"
ADMIN_USER_NAME = "simcluster-admin"
SYSTEM_MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS_NAME = "system:anonymous"
SA_PREFIX = "system:serviceaccount:"
SA_GROUP = "system:serviceaccounts"
DEFAULT_EXPIRATION_SECONDS = 3600  # authentication/v1 TokenRequestSpec default
MIN_EXPIRATION_SECONDS = 600  # pkg/apis/authentication/validation: "less than 10 minutes"
MAX_EXPIRATION_SECONDS = 1 << 32
DEFAULT_AUDIENCES = ("https://kubernetes.default.svc.cluster.local",)
TOO_SHORT = "may not specify a duration less than 10 minutes"
TOO_LONG = "may not specify a duration larger than 2^32 seconds"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """``authentication.k8s.io/v1`` UserInfo (empty fields omitted, as Go's omitempty does)."""
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ADMIN = UserInfo(ADMIN_USER_NAME, (SYSTEM_MASTERS, AUTHENTICATED))
ANONYMOUS = UserInfo(ANONYMOUS_NAME, (UNAUTHENTICATED,))
UNSECURED = UserInfo("system:unsecured", (SYSTEM_MASTERS, AUTHENTICATED))


def service_account_user_name(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    return UserInfo(
        service_account_user_name(namespace, name),
        (SA_GROUP, f"{SA_GROUP}:{namespace}", AUTHENTICATED),
        uid,
    )


@dataclass(frozen=True, slots=True)
class IssuedToken:
    namespace: str
    name: str
    sa_uid: str
    expires_at: float
    bound_pod: tuple[str, str] | None = None  # (name, uid)


def unauthorized() -> ApiError:
    # filters/authentication.go Unauthorized → apierrors.NewUnauthorized("Unauthorized").
    return ApiError(401, "Unauthorized", reason="Unauthorized")


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenAuthority:
    """Issues ServiceAccount tokens and turns an ``Authorization`` header into a user.

    ``clock`` (seconds since the epoch) is wall time by default; tests pass their own to expire
    tokens without waiting.
    """

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._tokens: dict[str, IssuedToken] = {}

    def issue(
        self,
        namespace: str,
        name: str,
        sa_uid: str,
        expiration_seconds: int,
        bound_pod: tuple[str, str] | None = None,
    ) -> tuple[str, float]:
        token = "sim-sa." + secrets.token_urlsafe(32)
        expires_at = self.clock() + expiration_seconds
        self._tokens[token] = IssuedToken(namespace, name, sa_uid, expires_at, bound_pod)
        self._forget_expired()
        return token, expires_at

    def _forget_expired(self) -> None:
        now = self.clock()
        for token in [t for t, issued in self._tokens.items() if issued.expires_at <= now]:
            del self._tokens[token]

    def authenticate(self, header: str | None, secure: bool = True) -> UserInfo:
        """The user of a request; raises 401 for a bearer token that names nobody (now).
        ``secure`` is False on the plain-HTTP (insecure) port."""
        nobody = ANONYMOUS if secure else UNSECURED
        if not header:
            return nobody
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer":
            return nobody  # not a bearer header: no authenticator handles it
        token = token.strip()
        if not token:
            raise unauthorized()
        if secrets.compare_digest(token, ADMIN_TOKEN):
            return ADMIN
        issued = self._tokens.get(token)
        if issued is None or issued.expires_at <= self.clock():
            raise unauthorized()
        sa = self.store.get(SERVICEACCOUNTS, issued.namespace, issued.name)
        if sa is None or sa.obj["metadata"].get("uid") != issued.sa_uid:
            raise unauthorized()  # deleted, or deleted and recreated under the same name
        if sa.obj["metadata"].get("deletionTimestamp"):
            raise unauthorized()
        user = service_account_user(issued.namespace, issued.name, issued.sa_uid)
        if issued.bound_pod is not None:
            pod = self.store.get(PODS, issued.namespace, issued.bound_pod[0])
            if pod is None or pod.obj["metadata"].get("uid") != issued.bound_pod[1]:
                raise unauthorized()
            extra: dict[str, tuple[str, ...]] = {
                POD_NAME_EXTRA: (issued.bound_pod[0],),
                POD_UID_EXTRA: (issued.bound_pod[1],),
            }
            user = UserInfo(user.name, user.groups, user.uid, extra)
        return user

    def token_request(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Answer ``POST serviceaccounts/NAME/token`` (pkg/registry/core/serviceaccount/storage/token.go)."""
        spec = body.get("spec")
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise errors.bad_request("json: cannot unmarshal spec into Go struct field TokenRequest.spec")
        expiration = spec.get("expirationSeconds")
        if expiration is None:
            expiration = DEFAULT_EXPIRATION_SECONDS
        if not isinstance(expiration, int) or isinstance(expiration, bool):
            raise errors.bad_request(
                "json: cannot unmarshal value into Go struct field TokenRequestSpec.spec.expirationSeconds "
                "of type int64"
            )
        audiences = spec.get("audiences") or list(DEFAULT_AUDIENCES)
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise errors.bad_request(
                "json: cannot unmarshal value into Go struct field TokenRequestSpec.spec.audiences "
                "of type []string"
            )
        sa = self.store.get(SERVICEACCOUNTS, namespace, name)
        if sa is None:
            raise errors.not_found("serviceaccounts", "", name)
        given = body.get("metadata")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        causes = []
        if expiration < MIN_EXPIRATION_SECONDS:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {expiration}: {TOO_SHORT}",
                    "field": "spec.expirationSeconds",
                }
            )
        if expiration > MAX_EXPIRATION_SECONDS:
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {expiration}: {TOO_LONG}",
                    "field": "spec.expirationSeconds",
                }
            )
        if causes:
            # errors.NewInvalid(gvk.GroupKind(), "", errs): the name in the message is empty.
            raise errors.invalid("TokenRequest", "authentication.k8s.io", "", causes)
        if meta.get("namespace", namespace) != namespace:
            raise errors.bad_request(f"namespace mismatch: {meta['namespace']} != {namespace}")
        if meta.get("name", name) != name:
            raise errors.bad_request(f"name mismatch: {meta['name']} != {name}")
        if sa.obj["metadata"].get("deletionTimestamp"):
            raise errors.bad_request(f"service account {namespace}/{name} is being deleted")
        bound = self._bound_pod(namespace, spec.get("boundObjectRef"))
        token, expires_at = self.issue(namespace, name, sa.obj["metadata"]["uid"], expiration, bound)
        out_spec: dict[str, Any] = {"audiences": audiences, "expirationSeconds": expiration}
        out_spec["boundObjectRef"] = spec.get("boundObjectRef")
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(self.clock())},
            "spec": out_spec,
            "status": {"token": token, "expirationTimestamp": rfc3339(expires_at)},
        }

    def _bound_pod(self, namespace: str, ref: Any) -> tuple[str, str] | None:
        if not ref:
            return None
        if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
            raise errors.bad_request("spec.boundObjectRef must name an object")
        kind = ref.get("kind")
        if kind != "Pod":
            # A real cluster also binds to Secrets and Nodes; the emulator serves neither.
            raise errors.bad_request(f"cannot bind token to object of type {kind} in this cluster (Pod only)")
        pod = self.store.get(PODS, namespace, ref["name"])
        if pod is None:
            raise errors.not_found("pods", "", ref["name"])
        uid = pod.obj["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict(
                "pods",
                "",
                ref["name"],
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated",
            )
        return ref["name"], uid
