"""Issue 23: protobuf request bodies. kubectl 1.33's typed commands (``create namespace``, ``create
configmap`` ...) send ``application/vnd.kubernetes.protobuf``; kubectl 1.27 sends JSON. Both must
create the same objects in the built-in cluster.

The decoder's unit tests build messages by hand from the field numbers of the published schemas,
cited as ``path:line`` at k8s.io/api 10b39a39b and k8s.io/apimachinery eed236ce (field numbers never
change between releases, so these hold for kubectl 1.27 and 1.33).
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from simcluster.kubeapi import KubeApiEmulator
from simcluster.kubeapi import protobuf as pb
from simcluster.kubeapi.errors import ApiError
from simcluster.kubeapi.openapi_pb import _len, _str, _varint
from simcluster.kubeapi.resources import ASCENDJOBS, CONFIGMAPS

KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
KUBECTLS = [p for p in (KUBECTL_DIR / "kubectl.1.27", KUBECTL_DIR / "kubectl.1.33") if p.exists()]

# --- hand-built wire messages -----------------------------------------------------------------------


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value & 0xFFFFFFFFFFFFFFFF)


def _msg(field: int, payload: bytes) -> bytes:
    """A message field, written even when empty (gogo-protobuf writes every non-pointer struct)."""
    return _len(field, payload)


def _entry(field: int, key: str, value: bytes) -> bytes:
    """One map<string, V> entry: {key = 1; value = 2}."""
    return _len(field, _str(1, key) + _len(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown: typeMeta = 1 {apiVersion = 1, kind = 2}, raw = 2
    (apimachinery pkg/runtime/generated.proto:100-105, 118-124), after the k8s\\x00 magic."""
    return pb.MAGIC + _msg(1, _str(1, api_version) + _str(2, kind)) + _len(2, raw)


def object_meta(name: str, labels: dict[str, str] | None = None) -> bytes:
    # meta/v1 generated.proto:776 name = 1, :850 creationTimestamp = 8 (empty = zero time),
    # :889 labels = 11; generateName = 2 sent empty as kubectl does.
    out = _str(1, name) + _msg(2, b"") + _msg(8, b"")
    for key, value in (labels or {}).items():
        out += _entry(11, key, value.encode())
    return out


def test_namespace_as_kubectl_1_33_sends_it() -> None:
    # The exact body `kubectl.1.33 create namespace x -v=9` printed (k8s\0, Unknown{v1/Namespace}).
    body = bytes.fromhex(
        "6b 38 73 00 0a 0f 0a 02 76 31 12 09 4e 61 6d 65 73 70 61 63 65 12 19 0a 11 0a 01 78 12 00 1a 00"
        "22 00 2a 00 32 00 38 00 42 00 12 00 1a 02 0a 00 1a 00 22 00"
    )
    assert pb.decode(body) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "x", "creationTimestamp": None},
        "spec": {},
        "status": {},
    }


def test_configmap_maps_and_pointer_bool() -> None:
    # core/v1 generated.proto:535 metadata = 1, :542 immutable = 4 (a *bool: false is kept),
    # :550 data = 2 (map<string,string>), :562 binaryData = 3 (map<string,bytes> → base64).
    raw = (
        _msg(1, object_meta("cm", {"app": "x"}))
        + _entry(2, "a", b"1")
        + _entry(3, "bin", b"\x00\xff")
        + _int(4, 0)
    )
    assert pb.decode(envelope("v1", "ConfigMap", raw)) == {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {"name": "cm", "creationTimestamp": None, "labels": {"app": "x"}},
        "immutable": False,
        "data": {"a": "1"},
        "binaryData": {"bin": base64.b64encode(b"\x00\xff").decode()},
    }


def test_secret_bytes_are_base64_like_json() -> None:
    # core/v1 generated.proto:6131 data = 2 (map<string,bytes>), :6146 type = 3, :6139 stringData = 4.
    raw = _msg(1, object_meta("s")) + _entry(2, "pw", b"s3cr\xe9t") + _str(3, "Opaque") + _entry(4, "x", b"y")
    out = pb.decode(envelope("v1", "Secret", raw))
    assert out["data"] == {"pw": base64.b64encode(b"s3cr\xe9t").decode()}
    assert out["type"] == "Opaque" and out["stringData"] == {"x": "y"}


def test_service_account_repeated_messages() -> None:
    # core/v1 generated.proto:6418 secrets = 2 (ObjectReference), :6426 imagePullSecrets = 3
    # (LocalObjectReference{name = 1}), :6431 automountServiceAccountToken = 4 (*bool).
    raw = _msg(1, object_meta("sa")) + _msg(3, _str(1, "pull")) + _int(4, 0)
    out = pb.decode(envelope("v1", "ServiceAccount", raw))
    assert out["imagePullSecrets"] == [{"name": "pull"}]
    assert out["automountServiceAccountToken"] is False and "secrets" not in out


def test_token_request_body() -> None:
    # authentication/v1 generated.proto:98 metadata = 1, :102 spec = 2; TokenRequestSpec :119
    # audiences = 1 (repeated, no omitempty: null when absent), :125 expirationSeconds = 4 (*int64).
    raw = _msg(1, object_meta("")) + _msg(2, _str(1, "api") + _int(4, 600)) + _msg(3, b"")
    out = pb.decode(envelope("authentication.k8s.io/v1", "TokenRequest", raw))
    # boundObjectRef is a pointer without omitempty (authentication/v1 types.go): JSON writes null.
    assert out["spec"] == {"audiences": ["api"], "expirationSeconds": 600, "boundObjectRef": None}
    assert out["status"] == {"token": "", "expirationTimestamp": None}
    bare = pb.decode(envelope("authentication.k8s.io/v1", "TokenRequest", _msg(2, b"")))
    assert bare["spec"] == {"audiences": None, "expirationSeconds": None, "boundObjectRef": None}


def test_self_subject_access_review_body() -> None:
    # authorization/v1 generated.proto:214 metadata = 1, :217 spec = 2; the spec's :231
    # resourceAttributes = 1; ResourceAttributes :145 namespace = 1, :149 verb = 2, :153 group = 3,
    # :161 resource = 5, :165 subresource = 6, :169 name = 7.
    attrs = _str(1, "team-a") + _str(2, "create") + _str(3, "mindxdl.gitee.com") + _str(5, "ascendjobs")
    raw = _msg(1, object_meta("")) + _msg(2, _msg(1, attrs)) + _msg(3, b"")
    out = pb.decode(envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", raw))
    assert out["spec"] == {
        "resourceAttributes": {
            "namespace": "team-a",
            "verb": "create",
            "group": "mindxdl.gitee.com",
            "resource": "ascendjobs",
        }
    }
    assert out["status"] == {"allowed": False}


def test_deployment_pointers_quantities_inline_volume() -> None:
    # apps/v1 generated.proto:237 metadata = 1, :241 spec = 2; DeploymentSpec :290 replicas = 1
    # (*int32: 0 is kept), :296 selector = 2; core/v1 :5293 PodTemplateSpec spec = 2, :4671 PodSpec
    # containers = 2, :704 Container name = 1, :711 image = 2, :782 resources = 8, :903
    # securityContext = 15; :5900 limits = 1 (map<string, Quantity{string = 1}>); SecurityContext
    # :6309 runAsUser = 4, :6342 allowPrivilegeEscalation = 7 (both pointers: zero values kept);
    # Volume :7184 name = 1, :7189 volumeSource = 2 (inlined in JSON), VolumeSource :7456 emptyDir = 2.
    container = (
        _str(1, "web")
        + _str(2, "img:1")
        + _msg(8, _entry(1, "cpu", _str(1, "500m")))
        + _msg(15, _int(4, 0) + _int(7, 0))
    )
    pod_spec = _msg(1, _str(1, "tmp") + _msg(2, _msg(2, b""))) + _msg(2, container)
    spec = _int(1, 0) + _msg(2, b"") + _msg(3, _msg(1, object_meta("")) + _msg(2, pod_spec))
    out = pb.decode(envelope("apps/v1", "Deployment", _msg(1, object_meta("d")) + _msg(2, spec)))
    assert out["spec"]["replicas"] == 0
    assert out["spec"]["selector"] == {}
    pod = out["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    (c,) = pod["containers"]
    assert c["name"] == "web" and c["image"] == "img:1"
    assert c["resources"] == {"limits": {"cpu": "500m"}}
    assert c["securityContext"] == {"runAsUser": 0, "allowPrivilegeEscalation": False}
    assert "status" in out and "strategy" in out["spec"]  # non-pointer structs are always written


def test_int_or_string_both_ways() -> None:
    # policy/v1 generated.proto:81 minAvailable = 1, :96 maxUnavailable = 3; IntOrString
    # (apimachinery pkg/util/intstr/generated.proto:37-42) type = 1 (0 int, 1 string), intVal = 2, strVal = 3.
    spec = _msg(1, _int(1, 0) + _int(2, 2)) + _msg(3, _int(1, 1) + _str(3, "25%"))
    out = pb.decode(envelope("policy/v1", "PodDisruptionBudget", _msg(1, object_meta("p")) + _msg(2, spec)))
    assert out["spec"]["minAvailable"] == 2 and out["spec"]["maxUnavailable"] == "25%"


def test_time_is_rfc3339_seconds() -> None:
    # meta/v1 generated.proto:850 creationTimestamp = 8; Time :1220 seconds = 1, :1226 nanos = 2.
    meta = _str(1, "t") + _msg(8, _int(1, 1_700_000_000) + _int(2, 5))
    out = pb.decode(envelope("v1", "ConfigMap", _msg(1, meta)))
    assert out["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"


def test_policy_rule_lists_without_omitempty() -> None:
    # rbac/v1 generated.proto:107 PolicyRule verbs = 1 (json "verbs", no omitempty: null when absent).
    rule = _len(2, b"") + _str(3, "pods")  # apiGroups [""], the core group
    raw = _msg(1, object_meta("r")) + _msg(2, rule)
    out = pb.decode(envelope("rbac.authorization.k8s.io/v1", "Role", raw))
    assert out["rules"] == [{"verbs": None, "apiGroups": [""], "resources": ["pods"]}]


def test_delete_options() -> None:
    # meta/v1 generated.proto:294 gracePeriodSeconds = 1 (*int64: 0 kept), :300 preconditions = 2
    # (Preconditions :1061 uid = 1), :318 propagationPolicy = 4, :327 dryRun = 5.
    raw = _int(1, 0) + _msg(2, _str(1, "u-1")) + _str(4, "Foreground") + _str(5, "All")
    assert pb.decode(envelope("v1", "DeleteOptions", raw)) == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-1"},
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
    }


def test_unknown_fields_are_dropped_like_the_real_decoder() -> None:
    # Field 99 is not in ConfigMap: gogo-protobuf's Unmarshal skips it (no strict validation for protobuf).
    raw = _msg(1, object_meta("u")) + _str(99, "future") + _entry(2, "a", b"b")
    assert pb.decode(envelope("v1", "ConfigMap", raw))["data"] == {"a": "b"}


def test_go_duration_strings() -> None:
    assert [
        pb.go_duration(n) for n in (0, 1_500_000_000, 3_600_000_000_000, 300_000_000, 90_000_000_000)
    ] == [
        "0s",
        "1.5s",
        "1h0m0s",
        "300ms",
        "1m30s",
    ]


def test_bad_bodies_are_400_or_415_never_500() -> None:
    rt = CONFIGMAPS
    with pytest.raises(ApiError) as exc:
        pb.body_as_json(pb.MEDIA_TYPE, b"k8s\x00\xff\xff", rt)
    assert exc.value.code == 400 and "could not be decoded" in exc.value.message
    with pytest.raises(ApiError) as exc:
        pb.body_as_json(pb.MEDIA_TYPE, b'{"kind":"ConfigMap"}', rt)
    assert exc.value.code == 400 and "k8s\\x00" in exc.value.message
    # A custom resource is never protobuf (the apiextensions server serves JSON and YAML only).
    with pytest.raises(ApiError) as exc:
        pb.body_as_json(pb.MEDIA_TYPE, envelope(ASCENDJOBS.api_version, "AscendJob", b""), ASCENDJOBS)
    assert exc.value.code == 415 and exc.value.reason == "UnsupportedMediaType"
    assert exc.value.message.endswith("accepted media types include: application/json, application/yaml")
    # A built-in kind the table does not know: 415 as well, listing what built-in types accept.
    with pytest.raises(ApiError) as exc:
        pb.body_as_json(pb.MEDIA_TYPE, envelope("v1", "NoSuchKind", b""), None)
    assert exc.value.code == 415 and "application/vnd.kubernetes.protobuf" in exc.value.message
    # JSON passes through untouched; an empty typeMeta takes the URL's kind.
    assert pb.body_as_json("application/json", b"{}", rt) == b"{}"
    no_type_meta = pb.MAGIC + _len(2, _msg(1, object_meta("d")))
    assert json.loads(pb.body_as_json(pb.MEDIA_TYPE, no_type_meta, rt))["kind"] == "ConfigMap"


# --- end to end: kubectl 1.27 (JSON) and 1.33 (protobuf) ----------------------------------------------


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    emu = KubeApiEmulator(host="127.0.0.1", port=0)
    emu.start()
    try:
        yield emu.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    finally:
        emu.stop()


def _kubectl(
    kubectl: Path, kubeconfig: Path, *args: str, verbose: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    argv = [str(kubectl), *args, *(["-v=9"] if verbose else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert proc.returncode == 0, (
        f"{kubectl.name} {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    )
    return proc


_SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "managedFields")


def _comparable(obj: dict[str, Any], ns: str) -> dict[str, Any]:
    """The object as read back, without what the server sets per write (uid, rv, times, managers)."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in _SERVER_SET}
    if meta.get("namespace") == ns:
        meta["namespace"] = "NS"
    if meta.get("name") == ns:
        meta["name"] = "NS"
    if meta.get("labels", {}).get("kubernetes.io/metadata.name") == ns:
        meta["labels"]["kubernetes.io/metadata.name"] = "NS"
    meta.get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return {**obj, "metadata": meta}


def _created_by(kubectl: Path, kubeconfig: Path, ns: str, tmp: Path) -> tuple[dict[str, Any], set[str]]:
    """Run the session with one kubectl; return what it created and the commands that sent protobuf."""
    protobuf: set[str] = set()

    def run(*args: str) -> None:
        proc = _kubectl(kubectl, kubeconfig, *args, verbose=True)
        if f"Content-Type: {pb.MEDIA_TYPE}" in proc.stderr:
            protobuf.add(" ".join(args[:2]))

    run("create", "namespace", ns)
    run("create", "configmap", "cm", "-n", ns, "--from-literal=a=1", "--from-literal=b=two")
    run("create", "secret", "generic", "sec", "-n", ns, "--from-literal=password=s3cr3t", "--type=Opaque")
    run("create", "serviceaccount", "robot", "-n", ns)
    run("create", "role", "reader", "-n", ns, "--verb=get,list", "--resource=configmaps,pods")
    run("create", "rolebinding", "reader", "-n", ns, "--role=reader", f"--serviceaccount={ns}:robot")
    manifest = tmp / f"{kubectl.name}.yaml"
    manifest.write_text(_MANIFEST)
    run("apply", "-n", ns, "-f", str(manifest))
    kinds = "secrets,serviceaccounts,services,deployments,jobs,roles,rolebindings,networkpolicies,pdb"
    kinds += ",configmaps"
    listed = json.loads(_kubectl(kubectl, kubeconfig, "get", kinds, "-n", ns, "-o", "json").stdout)["items"]
    listed.append(json.loads(_kubectl(kubectl, kubeconfig, "get", "namespace", ns, "-o", "json").stdout))
    out = [_comparable(o, ns) for o in listed]
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in out}, protobuf


_MANIFEST = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, labels: {app: web}}
data: {LOG_LEVEL: info, PORT: "8080"}
---
apiVersion: v1
kind: Secret
metadata: {name: app-secret}
type: Opaque
stringData: {DATABASE_URL: "postgres://db/app"}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: 8080, protocol: TCP}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: robot
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: web
        image: example/web:1
        ports: [{containerPort: 8080}]
        resources: {limits: {cpu: 500m, memory: 256Mi}}
        securityContext:
          {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        readinessProbe: {httpGet: {path: /readyz, port: 8080}, periodSeconds: 5}
        volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: example/web:1, args: [migrate]}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress: [{ports: [{port: 8080}]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
"""


@pytest.mark.slow(seconds=20)
@pytest.mark.skipif(len(KUBECTLS) < 2, reason=f"kubectl.1.27 and kubectl.1.33 are needed under {KUBECTL_DIR}")
def test_kubectl_1_27_json_and_1_33_protobuf_create_the_same_objects(
    kubeconfig: Path, tmp_path: Path
) -> None:
    old, new = KUBECTLS
    created_old, protobuf_old = _created_by(old, kubeconfig, "pb-old", tmp_path)
    created_new, protobuf_new = _created_by(new, kubeconfig, "pb-new", tmp_path)
    assert protobuf_old == set()  # 1.27 sends JSON for everything
    # 1.33's typed commands send protobuf; apply goes through the dynamic client and sends JSON.
    assert protobuf_new == {"create namespace", "create configmap", "create secret", "create serviceaccount",
                            "create role", "create rolebinding"}  # fmt: skip
    assert sorted(created_new) == sorted(created_old)
    for key in created_old:
        assert json.loads(json.dumps(created_new[key]).replace("pb-new", "NS")) == json.loads(
            json.dumps(created_old[key]).replace("pb-old", "NS")
        ), key
    assert created_new["Secret/sec"]["data"] == {"password": base64.b64encode(b"s3cr3t").decode()}
    assert created_new["Deployment/web"]["spec"]["replicas"] == 0
    for kubectl, ns in ((old, "pb-old"), (new, "pb-new")):
        _kubectl(
            kubectl, kubeconfig, "delete", "-n", ns, "configmap/cm", "secret/sec", "serviceaccount/robot"
        )
        _kubectl(kubectl, kubeconfig, "delete", "-n", ns, "-f", str(tmp_path / f"{kubectl.name}.yaml"))
        left = _kubectl(
            kubectl,
            kubeconfig,
            "get",
            "configmaps,secrets,serviceaccounts,deployments",
            "-n",
            ns,
            "-o",
            "name",
        )
        assert left.stdout == ""
        _kubectl(kubectl, kubeconfig, "delete", "namespace", ns)


def test_server_answers_protobuf_errors_with_a_status(kubeconfig: Path) -> None:
    """Raw protobuf POSTs through the HTTP stack: 201 with a JSON body (client-go decodes by the
    response's Content-Type), 415 for a custom resource, 400 for a broken envelope; always a Status."""
    conf = yaml.safe_load(kubeconfig.read_text())
    server = conf["clusters"][0]["cluster"]["server"]
    token = conf["users"][0]["user"]["token"]

    def post(path: str, body: bytes, method: str = "POST") -> tuple[int, str, dict[str, Any]]:
        request = urllib.request.Request(server + path, data=body, method=method)
        request.add_header("Content-Type", pb.MEDIA_TYPE)
        request.add_header("Accept", f"{pb.MEDIA_TYPE},application/json")  # what kubectl 1.33 asks for
        request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, resp.headers["Content-Type"], json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, err.headers["Content-Type"], json.loads(err.read())

    ns_body = envelope("v1", "Namespace", _msg(1, object_meta("pb-raw")) + _msg(2, b"") + _msg(3, b""))
    code, ctype, created = post("/api/v1/namespaces", ns_body)
    assert (code, ctype) == (201, "application/json") and created["status"] == {"phase": "Active"}
    code, _, status = post(
        f"/apis/{ASCENDJOBS.group}/{ASCENDJOBS.version}/namespaces/pb-raw/ascendjobs", ns_body
    )
    assert (code, status["kind"], status["reason"]) == (415, "Status", "UnsupportedMediaType")
    code, _, status = post("/api/v1/namespaces/pb-raw/configmaps", b"k8s\x00\x0a\xff")
    assert (code, status["kind"], status["reason"]) == (400, "Status", "BadRequest")
    # A typed client-go Delete sends DeleteOptions as protobuf: its precondition is honoured.
    code, _, _ = post(
        "/api/v1/namespaces/pb-raw/configmaps", envelope("v1", "ConfigMap", _msg(1, object_meta("c")))
    )
    assert code == 201
    stale = envelope("v1", "DeleteOptions", _msg(2, _str(1, "not-the-uid")))
    code, _, status = post("/api/v1/namespaces/pb-raw/configmaps/c", stale, method="DELETE")
    assert (code, status["reason"]) == (409, "Conflict") and "Precondition failed" in status["message"]


def _request_bodies(stderr: str) -> list[bytes]:
    """The request bodies ``kubectl -v=9`` prints as hexdump blocks after ``"Request Body"``."""
    bodies: list[bytes] = []
    block: list[str] | None = None
    for line in stderr.splitlines():
        if '"Request Body"' in line and line.endswith("body=<"):
            block = []
        elif block is not None and (row := re.match(r"^\s+[0-9a-f]{8}\s+((?:[0-9a-f]{2}\s+)+)\|", line)):
            block.append(row.group(1))
        elif block is not None:
            bodies.append(bytes.fromhex("".join(block).replace(" ", "")))
            block = None
    return bodies


_CREATE_COMMANDS = (
    ("namespace", "pbd-ns"),
    ("configmap", "pbd-cm", "--from-literal=a=1", "--from-literal=empty="),
    ("secret", "generic", "pbd-s", "--from-literal=pw=s3cr3t", "--type=Opaque"),
    ("secret", "docker-registry", "pbd-d", "--docker-server=r", "--docker-username=u", "--docker-password=p"),
    ("serviceaccount", "pbd-sa"),
    ("role", "pbd-r", "--verb=get,list", "--resource=pods,configmaps", "--resource-name=x"),
    ("rolebinding", "pbd-rb", "--role=pbd-r", "--user=u", "--serviceaccount=default:pbd-sa"),
    ("clusterrole", "pbd-cr", "--verb=get", "--non-resource-url=/healthz"),
    ("clusterrolebinding", "pbd-crb", "--clusterrole=pbd-cr", "--group=g"),
    ("deployment", "pbd-dep", "--image=x", "--replicas=0", "--port=8080"),
    ("job", "pbd-job", "--image=x", "--", "migrate"),
    ("cronjob", "pbd-cj", "--image=x", "--schedule=*/5 * * * *"),
    ("service", "clusterip", "pbd-svc", "--tcp=80:8080"),
    ("poddisruptionbudget", "pbd-pdb", "--selector=app=x", "--min-available=50%"),
    ("ingress", "pbd-ing", "--rule=a.example/=svc:80,tls=cert"),
    ("quota", "pbd-q", "--hard=pods=2,requests.cpu=500m"),
    ("priorityclass", "pbd-pc", "--value=10", "--preemption-policy=Never"),
)


@pytest.mark.slow(seconds=25)
@pytest.mark.skipif(not KUBECTLS or KUBECTLS[-1].name != "kubectl.1.33", reason="kubectl.1.33 is needed")
def test_every_kubectl_create_body_decodes_to_kubectls_own_json(kubeconfig: Path) -> None:
    """For each ``kubectl create`` form: the protobuf body kubectl 1.33 sends, decoded, equals the
    JSON kubectl itself prints for the same object (``--dry-run=client -o json``)."""
    kubectl = KUBECTLS[-1]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(kubeconfig.parent)}
    for args in _CREATE_COMMANDS:
        cut = args.index("--") if "--" in args else len(args)  # flags go before a command's own args

        def with_flags(*flags: str, args: tuple[str, ...] = args, cut: int = cut) -> list[str]:
            return ["create", *args[:cut], *flags, *args[cut:]]

        sent = subprocess.run(
            [str(kubectl), *with_flags("-v=9")], capture_output=True, text=True, timeout=60, env=env
        )
        assert f"Content-Type: {pb.MEDIA_TYPE}" in sent.stderr, args
        (body, *_) = [b for b in _request_bodies(sent.stderr) if b.startswith(pb.MAGIC)]
        printed = _kubectl(kubectl, kubeconfig, *with_flags("--dry-run=client", "-o", "json"))
        assert pb.decode(body) == json.loads(printed.stdout), args


def test_every_kind_in_the_table_decodes() -> None:
    """Each top-level kind (139 at k8s.io/api 10b39a39b) builds a message and decodes a bare body."""
    kinds = pb.schema()["kinds"]
    assert len(kinds) > 100
    for gvk in kinds:
        api_version, kind = gvk.rsplit("/", 1)
        out = pb.decode(envelope(api_version, kind, b""))
        assert (out["apiVersion"], out["kind"]) == (api_version, kind)


# Bodies kubectl 1.33.1 sent (-v=9) for `create token sa1 --duration=10m --audience=api` and
# `auth can-i create ascendjobs.mindxdl.gitee.com -n team-a`; their endpoints are the RBAC work's.
_TOKEN_REQUEST = (
    "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e52657175657374"
    "12220a100a0012001a0022002a0032003800420012080a0361706920d8041a040a0012001a002200"
)
_SSAR = (
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363"
    "65737352657669657712550a100a0012001a0022002a0032003800420012370a350a067465616d2d61120663726561"
    "74651a116d696e6478646c2e67697465652e636f6d22002a0a617363656e646a6f627332003a001a08080012001a00"
    "20001a002200"
)


def test_kubectl_token_request_and_access_review_bodies() -> None:
    token = json.loads(pb.body_as_json(pb.MEDIA_TYPE, bytes.fromhex(_TOKEN_REQUEST), None))
    assert token["kind"] == "TokenRequest"
    assert token["spec"] == {"audiences": ["api"], "expirationSeconds": 600, "boundObjectRef": None}
    review = json.loads(pb.body_as_json(pb.MEDIA_TYPE, bytes.fromhex(_SSAR), None))
    assert review["kind"] == "SelfSubjectAccessReview"
    assert review["spec"]["resourceAttributes"] == {
        "namespace": "team-a",
        "verb": "create",
        "group": "mindxdl.gitee.com",
        "resource": "ascendjobs",
    }
    # An envelope without typeMeta on serviceaccounts/token is read as the subresource's kind.
    bare = pb.MAGIC + _len(2, _msg(2, _int(4, 60)))
    out = json.loads(
        pb.body_as_json(
            pb.MEDIA_TYPE, bare, None, api_version="authentication.k8s.io/v1", kind="TokenRequest"
        )
    )
    assert out["kind"] == "TokenRequest" and out["spec"]["expirationSeconds"] == 60
