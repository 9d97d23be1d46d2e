"""Issue 23 item 1: the built-in cluster authenticates (static admin token, ServiceAccount tokens from
the TokenRequest API) and authorizes every request with RBAC, answering like kube-apiserver.

The 403 body is the one k8s.io/apiserver builds: pkg/endpoints/handlers/responsewriters/errors.go
``forbiddenMessage`` (lines 60-80: ``User %q cannot %s resource %q in API group %q in the namespace
%q`` / ``at the cluster scope`` / ``cannot %s path %q``) wrapped by apimachinery ``NewForbidden``
(``<resource>.<group> ["name"] is forbidden: ...``, details group/kind=resource/name). The rule
matching is kubernetes pkg/apis/rbac/v1/evaluation_helpers.go; binding scope is
pkg/registry/rbac/validation/rule.go ``VisitRulesFor``.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from kubernetes import client, config

from simcluster.kubeapi import KubeApiEmulator, rbac
from simcluster.kubeapi.authn import ANONYMOUS
from tests.support.kube_identity import ADMIN_HEADERS, service_account_kubeconfig
from tests.support.kubeapi import ACJ, ascendjob, pod

RBAC = "rbac.authorization.k8s.io"
SA_NAME = "robot"


def _status(exc: client.ApiException) -> dict[str, object]:
    return json.loads(exc.body)


def _raw(
    emulator: KubeApiEmulator,
    method: str,
    path: str,
    headers: dict[str, str] | None = None,
    body: object = None,
    *,
    secure: bool = False,
) -> tuple[int, bytes]:
    if secure:
        url = urlparse(emulator.secure_url)
        context = ssl.create_default_context(cadata=emulator.tls.ca_pem.decode())
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(
            url.hostname, url.port, timeout=10, context=context
        )
    else:
        url = urlparse(emulator.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    try:
        conn.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _role(ns: str, name: str, *rules: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": ns}, "rules": list(rules)}


def _rule(
    verbs: list[str], group: str, resources: list[str], names: list[str] | None = None
) -> dict[str, object]:
    rule: dict[str, object] = {"verbs": verbs, "apiGroups": [group], "resources": resources}
    if names:
        rule["resourceNames"] = names
    return rule


def _sa_subject(ns: str) -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": SA_NAME, "namespace": ns}]


@pytest.fixture
def rbac_api(api_client: client.ApiClient) -> client.RbacAuthorizationV1Api:
    return client.RbacAuthorizationV1Api(api_client)


@pytest.fixture
def as_robot(kubeconfig: Path, ns: str, tmp_path: Path) -> Iterator[Callable[[], client.ApiClient]]:
    """A client factory for ServiceAccount ``robot`` in the test's namespace (created here)."""
    made: list[client.ApiClient] = []

    def build() -> client.ApiClient:
        kc = service_account_kubeconfig(kubeconfig, ns, SA_NAME, tmp_path / f"sa{len(made)}", create=True)
        api = config.new_client_from_config(config_file=str(kc))
        made.append(api)
        return api

    yield build
    for api in made:
        api.close()


def _bind_role(rbac_api: client.RbacAuthorizationV1Api, ns: str, *rules: dict[str, object]) -> None:
    rbac_api.create_namespaced_role(ns, _role(ns, "jobs", *rules))
    rbac_api.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "jobs"},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "jobs"},
            "subjects": _sa_subject(ns),
        },
    )


def test_a_role_with_patch_but_not_create_gets_the_real_403_status(
    rbac_api: client.RbacAuthorizationV1Api,
    custom: client.CustomObjectsApi,
    as_robot: Callable[[], client.ApiClient],
    ns: str,
) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j1"))
    _bind_role(rbac_api, ns, _rule(["get", "list", "watch", "patch"], "mindxdl.gitee.com", ["ascendjobs"]))
    robot = client.CustomObjectsApi(as_robot())

    with pytest.raises(client.ApiException) as denied:
        robot.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j2"))
    user = f"system:serviceaccount:{ns}:{SA_NAME}"
    assert denied.value.status == 403
    assert _status(denied.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'ascendjobs.mindxdl.gitee.com is forbidden: User "{user}" cannot create resource '
        f'"ascendjobs" in API group "mindxdl.gitee.com" in the namespace "{ns}"',
        "reason": "Forbidden",
        "details": {"group": "mindxdl.gitee.com", "kind": "ascendjobs"},
        "code": 403,
    }
    patched = robot.patch_namespaced_custom_object(
        *ACJ, ns, "ascendjobs", "j1", {"metadata": {"labels": {"policy": "p"}}}
    )
    assert patched["metadata"]["labels"] == {"policy": "p"}
    assert robot.get_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j1")["metadata"]["name"] == "j1"
    with pytest.raises(client.ApiException) as named:
        robot.delete_namespaced_custom_object(*ACJ, ns, "ascendjobs", "j1")
    body = _status(named.value)
    assert body["message"] == (
        f'ascendjobs.mindxdl.gitee.com "j1" is forbidden: User "{user}" cannot delete resource '
        f'"ascendjobs" in API group "mindxdl.gitee.com" in the namespace "{ns}"'
    )
    assert body["details"] == {"name": "j1", "group": "mindxdl.gitee.com", "kind": "ascendjobs"}
    # A denied write never reaches the store.
    assert [
        i["metadata"]["name"] for i in custom.list_namespaced_custom_object(*ACJ, ns, "ascendjobs")["items"]
    ] == ["j1"]


def test_a_role_binding_grants_in_its_namespace_a_cluster_role_binding_everywhere(
    rbac_api: client.RbacAuthorizationV1Api,
    core: client.CoreV1Api,
    as_robot: Callable[[], client.ApiClient],
    ns: str,
) -> None:
    other = f"{ns}-b"
    core.create_namespace({"metadata": {"name": other}})
    role_name = f"cm-reader-{ns}"
    try:
        rbac_api.create_cluster_role(
            {"metadata": {"name": role_name}, "rules": [_rule(["get", "list"], "", ["configmaps"])]}
        )
        rbac_api.create_namespaced_role_binding(
            ns,
            {
                "metadata": {"name": "read"},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role_name},
                "subjects": [
                    {"kind": "ServiceAccount", "name": SA_NAME}
                ],  # namespace defaults to the binding's
            },
        )
        robot = client.CoreV1Api(as_robot())
        assert robot.list_namespaced_config_map(ns).items is not None
        user = f"system:serviceaccount:{ns}:{SA_NAME}"
        with pytest.raises(client.ApiException) as elsewhere:
            robot.list_namespaced_config_map(other)
        assert _status(elsewhere.value)["message"] == (
            f'configmaps is forbidden: User "{user}" cannot list resource "configmaps" in API group "" '
            f'in the namespace "{other}"'
        )
        assert _status(elsewhere.value)["details"] == {"kind": "configmaps"}
        with pytest.raises(client.ApiException) as cluster_wide:
            robot.list_config_map_for_all_namespaces()
        assert _status(cluster_wide.value)["message"] == (
            f'configmaps is forbidden: User "{user}" cannot list resource "configmaps" in API group "" '
            "at the cluster scope"
        )
        rbac_api.create_cluster_role_binding(
            {
                "metadata": {"name": role_name},
                "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role_name},
                "subjects": _sa_subject(ns),
            }
        )
        assert robot.list_namespaced_config_map(other).items is not None
        assert robot.list_config_map_for_all_namespaces().items is not None
    finally:
        with contextlib.suppress(client.ApiException):
            rbac_api.delete_cluster_role_binding(role_name)
        with contextlib.suppress(client.ApiException):
            rbac_api.delete_cluster_role(role_name)
        core.delete_namespace(other)


def test_resource_names_allow_only_the_named_object_and_a_list_that_selects_it(
    rbac_api: client.RbacAuthorizationV1Api,
    core: client.CoreV1Api,
    as_robot: Callable[[], client.ApiClient],
    ns: str,
) -> None:
    for name in ("mine", "theirs"):
        core.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    _bind_role(rbac_api, ns, _rule(["get", "list", "patch"], "", ["configmaps"], names=["mine"]))
    robot = client.CoreV1Api(as_robot())
    assert robot.read_namespaced_config_map("mine", ns).metadata.name == "mine"
    robot.patch_namespaced_config_map("mine", ns, {"data": {"k": "v"}})
    with pytest.raises(client.ApiException) as theirs:
        robot.read_namespaced_config_map("theirs", ns)
    assert theirs.value.status == 403
    with pytest.raises(client.ApiException) as unnamed:
        robot.list_namespaced_config_map(ns)  # a list names no object: resourceNames cannot match
    assert unnamed.value.status == 403
    # requestinfo.go: a list whose field selector requires metadata.name=X is authorized as name X.
    selected = robot.list_namespaced_config_map(ns, field_selector="metadata.name=mine")
    assert [c.metadata.name for c in selected.items] == ["mine"]


def test_subresources_are_authorized_apart_from_their_resource(
    ns: str,
    as_robot: Callable[[], client.ApiClient],
    rbac_api: client.RbacAuthorizationV1Api,
    custom: client.CustomObjectsApi,
    core: client.CoreV1Api,
) -> None:
    custom.create_namespaced_custom_object(*ACJ, ns, "ascendjobs", ascendjob("j"))
    core.create_namespaced_pod(ns, pod("p"))
    _bind_role(
        rbac_api,
        ns,
        _rule(["get", "patch"], "mindxdl.gitee.com", ["ascendjobs"]),
        _rule(["get"], "", ["pods"]),
    )
    api = as_robot()
    robot_custom, robot_core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    user = f"system:serviceaccount:{ns}:{SA_NAME}"
    with pytest.raises(client.ApiException) as status:
        robot_custom.patch_namespaced_custom_object_status(*ACJ, ns, "ascendjobs", "j", {"status": {}})
    assert _status(status.value)["message"] == (
        f'ascendjobs.mindxdl.gitee.com "j" is forbidden: User "{user}" cannot patch resource '
        f'"ascendjobs/status" in API group "mindxdl.gitee.com" in the namespace "{ns}"'
    )
    with pytest.raises(client.ApiException) as logs:
        robot_core.read_namespaced_pod_log("p", ns)
    assert 'cannot get resource "pods/log"' in _status(logs.value)["message"]
    # "*/status" matches the status subresource of every resource (evaluation_helpers.go ResourceMatches).
    rbac_api.patch_namespaced_role(
        "jobs",
        ns,
        [
            {"op": "add", "path": "/rules/-", "value": _rule(["patch"], "mindxdl.gitee.com", ["*/status"])},
            {"op": "add", "path": "/rules/-", "value": _rule(["get"], "", ["pods/log"])},
        ],
    )
    robot_custom.patch_namespaced_custom_object_status(*ACJ, ns, "ascendjobs", "j", {"status": {}})
    with pytest.raises(client.ApiException) as no_kubelet:
        robot_core.read_namespaced_pod_log("p", ns)
    assert no_kubelet.value.status == 400  # authorized now: the answer is the log endpoint's own


def test_a_watch_is_authorized_before_it_streams(
    rbac_api: client.RbacAuthorizationV1Api,
    emulator: KubeApiEmulator,
    kubeconfig: Path,
    ns: str,
    tmp_path: Path,
) -> None:
    _bind_role(rbac_api, ns, _rule(["list"], "", ["configmaps"]))
    kc = service_account_kubeconfig(kubeconfig, ns, SA_NAME, tmp_path / "sa", create=True)
    token = yaml_token(kc)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    headers = {"Authorization": f"Bearer {token}"}
    assert _raw(emulator, "GET", path, headers)[0] == 200
    code, body = _raw(emulator, "GET", f"{path}?watch=1&timeoutSeconds=5", headers)
    assert code == 403  # a Status answer, not a 200 stream that fails later
    assert json.loads(body)["message"].endswith(
        f'cannot watch resource "configmaps" in API group "" in the namespace "{ns}"'
    )
    rbac_api.patch_namespaced_role("jobs", ns, {"rules": [_rule(["list", "watch"], "", ["configmaps"])]})
    code, _ = _raw(emulator, "GET", f"{path}?watch=1&timeoutSeconds=1", headers)
    assert code == 200


def yaml_token(kubeconfig_path: Path) -> str:
    return str(yaml.safe_load(kubeconfig_path.read_text())["users"][0]["user"]["token"])


def test_bad_missing_and_anonymous_credentials(emulator: KubeApiEmulator) -> None:
    code, body = _raw(emulator, "GET", "/api/v1/namespaces", {"Authorization": "Bearer not-a-token"})
    assert code == 401
    assert _raw(emulator, "GET", "/api/v1/namespaces", {"Authorization": "Bearer x"}, secure=True)[0] == 401
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    # No credentials on the HTTPS port: system:anonymous, which the default roles let read only
    # the public info (bootstrappolicy system:public-info-viewer).
    assert _raw(emulator, "GET", "/version", secure=True)[0] == 200
    assert _raw(emulator, "GET", "/healthz", secure=True)[0] == 200
    code, body = _raw(emulator, "GET", "/apis", secure=True)
    assert code == 403
    assert json.loads(body)["message"] == 'forbidden: User "system:anonymous" cannot get path "/apis"'
    code, body = _raw(emulator, "GET", "/api/v1/namespaces", secure=True)
    assert json.loads(body)["message"] == (
        'namespaces is forbidden: User "system:anonymous" cannot list resource "namespaces" in API group "" '
        "at the cluster scope"
    )
    assert _raw(emulator, "GET", "/api/v1/namespaces", ADMIN_HEADERS, secure=True)[0] == 200
    # The plain-HTTP port is the old insecure port: no credentials is cluster-admin.
    assert _raw(emulator, "GET", "/api/v1/namespaces")[0] == 200


def test_a_token_dies_with_its_service_account_its_pod_and_its_expiry(
    emulator: KubeApiEmulator, core: client.CoreV1Api, ns: str
) -> None:
    core.create_namespaced_service_account(ns, {"metadata": {"name": SA_NAME}})
    token = emulator.service_account_token(ns, SA_NAME)
    whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

    def post_review(tok: str) -> int:
        url = urlparse(emulator.url)
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
        conn.request("POST", whoami, body=b"{}", headers={"Authorization": f"Bearer {tok}"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if resp.status == 201:
            info = json.loads(data)["status"]["userInfo"]
            assert info["username"] == f"system:serviceaccount:{ns}:{SA_NAME}"
            assert info["groups"] == [
                "system:serviceaccounts",
                f"system:serviceaccounts:{ns}",
                "system:authenticated",
            ]
        return resp.status

    assert post_review(token) == 201
    tokens = emulator.api.tokens
    real_clock = tokens.clock
    tokens.clock = lambda: real_clock() + 3601  # an hour later: the default expiry has passed
    try:
        assert post_review(token) == 401
    finally:
        tokens.clock = real_clock
    assert post_review(token) == 201
    core.delete_namespaced_service_account(SA_NAME, ns)
    assert post_review(token) == 401
    core.create_namespaced_service_account(ns, {"metadata": {"name": SA_NAME}})  # same name, new UID
    assert post_review(token) == 401

    core.create_namespaced_pod(ns, pod("runner"))
    bound = core.create_namespaced_service_account_token(
        SA_NAME, ns, {"spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "runner"}}}
    ).status.token
    assert post_review(bound) == 201
    core.delete_namespaced_pod("runner", ns)
    assert post_review(bound) == 401

    with pytest.raises(client.ApiException) as short:
        core.create_namespaced_service_account_token(SA_NAME, ns, {"spec": {"expirationSeconds": 60}})
    assert short.value.status == 422
    # pkg/apis/authentication/validation ValidateTokenRequest; NewInvalid(gvk.GroupKind(), "", errs).
    assert _status(short.value)["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 60: '
        "may not specify a duration less than 10 minutes"
    )
    with pytest.raises(client.ApiException) as missing:
        core.create_namespaced_service_account_token("nobody", ns, {"spec": {}})
    assert missing.value.status == 404


def test_a_binding_to_a_missing_role_says_so_in_the_denial(
    rbac_api: client.RbacAuthorizationV1Api, as_robot: Callable[[], client.ApiClient], ns: str
) -> None:
    rbac_api.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "dangling"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": f"no-such-role-{ns}"},
            "subjects": _sa_subject(ns),
        },
    )
    with pytest.raises(client.ApiException) as denied:
        client.CoreV1Api(as_robot()).list_namespaced_pod(ns)
    # rbac.go Authorize: resolution errors become the reason, "RBAC: <lister's not-found error>".
    assert _status(denied.value)["message"].endswith(
        f': RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role-{ns}" not found'
    )


def test_rbac_objects_are_validated_like_the_registry_does(
    rbac_api: client.RbacAuthorizationV1Api, emulator: KubeApiEmulator, ns: str
) -> None:
    rbac_api.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": _sa_subject(ns),
        },
    )
    with pytest.raises(client.ApiException) as changed:
        rbac_api.patch_namespaced_role_binding("b", ns, {"roleRef": {"name": "edit"}})
    assert changed.value.status == 422 and "cannot change roleRef" in _status(changed.value)["message"]
    # The typed client refuses a rule without verbs itself; the server must too.
    code, body = _raw(
        emulator,
        "POST",
        f"/apis/{RBAC}/v1/namespaces/{ns}/roles",
        ADMIN_HEADERS,
        _role(ns, "r", {"apiGroups": [""], "resources": ["pods"]}),
    )
    assert code == 422
    assert json.loads(body)["message"] == (
        'Role.rbac.authorization.k8s.io "r" is invalid: rules[0].verbs: Required value: '
        "verbs must contain at least one value"
    )


def test_the_default_roles_exist_and_view_grants_no_custom_resources(
    rbac_api: client.RbacAuthorizationV1Api, as_robot: Callable[[], client.ApiClient], ns: str
) -> None:
    names = {r.metadata.name for r in rbac_api.list_cluster_role().items}
    assert {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"} <= names
    assert {"view", "edit", "admin"} <= names
    rbac_api.create_namespaced_role_binding(
        ns,
        {
            "metadata": {"name": "viewer"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"},
            "subjects": _sa_subject(ns),
        },
    )
    api = as_robot()
    assert client.CoreV1Api(api).list_namespaced_pod(ns).items == []
    with pytest.raises(client.ApiException) as crd:
        client.CustomObjectsApi(api).list_namespaced_custom_object(*ACJ, ns, "ascendjobs")
    assert crd.value.status == 403
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"namespace": ns, "verb": "list", "resource": "pods"}}}
    )
    assert review.status.allowed is True
    assert review.status.reason == (
        f'RBAC: allowed by RoleBinding "viewer/{ns}" of ClusterRole "view" to ServiceAccount "{SA_NAME}/{ns}"'
    )


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        # (verb, namespace, group, resource, subresource, name) as requestinfo.go NewRequestInfo reads them
        ("GET", "/api/v1/namespaces/a/pods", {}, ("list", "a", "", "pods", "", "")),
        ("GET", "/api/v1/namespaces/a/pods", {"watch": "1"}, ("watch", "a", "", "pods", "", "")),
        ("GET", "/api/v1/namespaces/a/pods", {"watch": "false"}, ("list", "a", "", "pods", "", "")),
        ("GET", "/api/v1/namespaces/a/pods/p/log", {}, ("get", "a", "", "pods", "log", "p")),
        (
            "DELETE",
            "/api/v1/namespaces/a/configmaps",
            {},
            ("deletecollection", "a", "", "configmaps", "", ""),
        ),
        ("PUT", "/api/v1/namespaces/a", {}, ("update", "a", "", "namespaces", "", "a")),
        ("PATCH", "/api/v1/namespaces/a/status", {}, ("patch", "a", "", "namespaces", "status", "a")),
        (
            "GET",
            "/apis/mindxdl.gitee.com/v1/ascendjobs",
            {},
            ("list", "", "mindxdl.gitee.com", "ascendjobs", "", ""),
        ),
        (
            "GET",
            "/apis/mindxdl.gitee.com/v1/namespaces/a/ascendjobs",
            {"fieldSelector": "metadata.name=j"},
            ("list", "a", "mindxdl.gitee.com", "ascendjobs", "", "j"),
        ),
        (
            "POST",
            "/api/v1/namespaces/a/serviceaccounts/sa/token",
            {},
            ("create", "a", "", "serviceaccounts", "token", "sa"),
        ),
    ],
)
def test_request_attributes_follow_requestinfo(
    method: str, path: str, query: dict[str, str], expected: tuple[str, ...]
) -> None:
    attrs = rbac.request_attributes(method, path, query, ANONYMOUS)
    assert attrs.resource_request
    assert (
        attrs.verb,
        attrs.namespace,
        attrs.api_group,
        attrs.resource,
        attrs.subresource,
        attrs.name,
    ) == expected


@pytest.mark.parametrize(
    "path", ["/api", "/apis", "/api/v1", "/apis/mindxdl.gitee.com/v1", "/healthz", "/openapi/v3"]
)
def test_discovery_paths_are_non_resource_requests(path: str) -> None:
    attrs = rbac.request_attributes("GET", path, {}, ANONYMOUS)
    assert not attrs.resource_request and attrs.verb == "get" and attrs.path == path


def test_the_admin_is_system_masters_and_lists_cluster_admin_rules(api_client: client.ApiClient) -> None:
    who = client.AuthenticationV1Api(api_client).create_self_subject_review({})
    assert who.status.user_info.username == "simcluster-admin"
    assert who.status.user_info.groups == ["system:masters", "system:authenticated"]
    rules = client.AuthorizationV1Api(api_client).create_self_subject_rules_review(
        {"spec": {"namespace": "default"}}
    )
    assert {"verbs": ["*"], "api_groups": ["*"], "resources": ["*"]}.items() <= rules.status.resource_rules[
        0
    ].to_dict().items()
    assert rules.status.incomplete is False
