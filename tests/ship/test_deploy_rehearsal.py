"""Deploy rehearsal (issue #23 item 2): deploy/ comes up and serves its users, as a platform team runs it.

The sequence is docs/operator-guide.md "Install", step by step: render the quickstart overlay with
``kubectl kustomize``; create the namespace, the operator's Secret and the webhook's TLS Secrets (what
cert-manager issues in a real install: tests/support/rehearsal_admission.py) and apply the overlay with
kubectl (validated against the built-in cluster's OpenAPI, 1.27 and 1.33) to the built-in cluster, which
stores every kind and enforces RBAC; inject the webhook's caBundle (cert-manager's CA injector); read
every Deployment, Job, Service, ConfigMap and Secret back from the cluster; run the migration Job and
check the built-in presets; start every Deployment (its initContainer first) as local processes with
exactly its pod's environment, its Secret volumes as files and a TokenRequest token of its own
ServiceAccount when it mounts one (tests/support/rehearsal.py says what is mapped); probe each the way
the kubelet does; every pod must be Ready within its startup budget, and a Ready pod is listed in the
Endpoints of its Services. The built-in cluster calls the admission webhook as kube-apiserver does:
through the Service the MutatingWebhookConfiguration names, over TLS checked against the caBundle,
presenting the client certificate of its AdmissionConfiguration.

Then the user flows through the web process's API with no 403 in any log: adoption, save → push,
preview, recreate, ingest, admission (a job created in a namespace with a default policy), a
platform-mode decision (the decider pod answering the built-in ClusterD) and a webhook out (the worker
pod delivering the fault's incident to a receiver). A verb removed from a role, a wrong probe path or
a Secret the webhook pod mounts missing fails the rehearsal.

One install per module (``rehearsed``); the tests that change something undo it. One module, not two:
a second install would cost every run another ~35 s of CPU for parallelism a 2-core run lacks anyway.
"""

from __future__ import annotations

import copy
import json
import re
import secrets
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from apps.admission.pending import ANNOTATION_ADMISSION_UID
from apps.admission.webhook_config import MANAGED_LABEL
from apps.events.webhooks import verify
from apps.policies.builtin_presets import BUILTIN_PRESETS
from apps.policies.validation import validate_policy
from mindcluster import keys as k
from simcluster.kube import Kube
from simcluster.runtime import SimCluster
from tests.support import wait_for
from tests.support.deploy import REPO, Doc, kubectl, main_container, of_kind, pod_spec, render, workloads
from tests.support.kube_identity import service_account_kubeconfig
from tests.support.processes import RedisServer
from tests.support.rehearsal import (
    Overrides,
    Pod,
    Readiness,
    Sources,
    decode_secret,
    kubectl_json,
    prepare,
    replica_name,
    run_to_completion,
    start,
    stop,
    wait_ready,
)
from tests.support.rehearsal_admission import (
    AdmissionPki,
    endpoints_for,
    inject_ca_bundle,
    issue_certificates,
)
from tests.support.rehearsal_flows import AdminSite, Api, Receiver, forbidden_lines, issue_admin_token
from tests.support.sim import conditions, create_job, make_job

NAMESPACE = "mindcluster-recovery"
OVERLAY = "quickstart"
# The processes the rehearsal starts: every Deployment of the overlay.
PROCESSES = ("web", "worker", "beat", "ingester", "decider", "admission")
# Run with every replica the Deployment asks for (the others with one pod each, to spare the machine):
# the processes that share the clusters by lease, so the rehearsal shows the split.
REPLICATED = ("ingester", "decider")
# cert-manager's kinds: the built-in cluster has no cert-manager (nor do many real ones, see the guide);
# the rehearsal issues their Secrets itself (tests/support/rehearsal_admission.py).
NO_CRD = "cert-manager.io/"
PRIVATE_RECEIVERS = {"WEBHOOK_ALLOW_PRIVATE_TARGETS": "true"}


def own_kubeconfig(sim: SimCluster, service_account: str, workdir: Path) -> Path:
    """The kubeconfig of ServiceAccount ``service_account``: a TokenRequest token, over the HTTPS port,
    so the process calling with it can do exactly what deploy/ grants that ServiceAccount."""
    return service_account_kubeconfig(
        sim.kubeconfig_path, NAMESPACE, service_account, workdir / f"{service_account}.kubeconfig"
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> AdmissionPki:
    """What cert-manager issues for the webhook, and the API server's AdmissionConfiguration."""
    return AdmissionPki.make(tmp_path_factory.mktemp("admission-pki"))


@pytest.fixture(scope="module")
def sim(pki: AdmissionPki) -> Iterator[SimCluster]:
    """The install's own cluster, not the process's shared one: it creates a namespace and Secrets of
    fixed names, and under xdist a module's fixtures may be set up more than once in one process. Its
    API server presents the client certificate of its AdmissionConfiguration to the webhook."""
    with SimCluster(seed=23, control_port=0, admission_config=pki.admission_config) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def fresh_database() -> Iterator[str]:
    """A database nobody has migrated: the install's. Dropped afterwards."""
    from django.db import connection

    settings = connection.settings_dict
    name = f"{settings['NAME']}_rehearsal_{uuid.uuid4().hex[:6]}"
    auth = settings["USER"] + (f":{settings['PASSWORD']}" if settings.get("PASSWORD") else "")
    server = f"postgres://{auth}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A private Redis: the rehearsal's Celery queues are nobody else's."""
    server = RedisServer()
    server.start()
    yield server  # pytest runs the rest at teardown, whatever the test did
    server.stop()


@pytest.fixture(scope="module")
def image_var(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's /app/var: static files collected as the Dockerfile's build step does."""
    var = tmp_path_factory.mktemp("image-var")
    env = {
        "PATH": "/usr/bin:/bin",
        "DJANGO_SETTINGS_MODULE": "controlplane.settings.base",
        "VAR_DIR": str(var),
    }
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=300,
    )
    return var


def operator_install(
    kubectl_bin: Path, sim: SimCluster, rendered: list[Doc], secret: dict[str, str], pki: AdmissionPki
) -> str:
    """docs/operator-guide.md "Install" steps 2-5: namespace, Secret, the webhook's TLS Secrets (what
    cert-manager issues), apply, the caBundle (cert-manager's CA injector). Returns kubectl's output."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(kubectl_bin), "--kubeconfig", sim.kubeconfig_path, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    created = run("create", "namespace", NAMESPACE, "--save-config")
    assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr  # a re-run
    literals = [f"--from-literal={key}={value}" for key, value in secret.items()]
    made = run("-n", NAMESPACE, "create", "secret", "generic", "recovery-control-plane", *literals)
    assert made.returncode == 0, made.stderr
    issue_certificates(run, rendered, pki)
    manifest = Path(sim.kubeconfig_path).with_name(f"rendered-{uuid.uuid4().hex[:6]}.yaml")
    manifest.write_text(yaml.safe_dump_all([d for d in rendered if not d["apiVersion"].startswith(NO_CRD)]))
    # Validated against the cluster's OpenAPI, as kubectl does by default.
    applied = run("apply", "-f", str(manifest))
    assert applied.returncode == 0 and applied.stderr.strip() == "", applied.stderr
    inject_ca_bundle(run, rendered)
    return applied.stdout


def cluster_configmaps(kubectl_bin: Path, sim: SimCluster) -> dict[str, dict[str, str]]:
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "configmaps")
    return {item["metadata"]["name"]: dict(item.get("data") or {}) for item in listed["items"]}


def cluster_secrets(kubectl_bin: Path, sim: SimCluster) -> dict[str, dict[str, str]]:
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "secrets")
    return {item["metadata"]["name"]: decode_secret(item) for item in listed["items"]}


def cluster_services(kubectl_bin: Path, sim: SimCluster) -> list[Doc]:
    return list(kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "services")["items"])


def cluster_workloads(kubectl_bin: Path, sim: SimCluster) -> dict[str, Doc]:
    """The Deployments and the migration Job as the cluster stores them (what a kubelet would run)."""
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "deployments,jobs")
    return workloads(listed["items"])


def builtin_presets(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM policies_preset WHERE builtin")}


class Rehearsal:
    """Pods started from the rendered overlay; stop() ends every one of them. A pod that becomes Ready
    is written into the Endpoints of the Services selecting it (the endpoints controller's part)."""

    def __init__(self, root: Path, sources: Sources, sim: SimCluster, services: list[Doc]) -> None:
        self.root, self.sources, self.services = root, sources, services
        self.overrides, self.image_var = sources.overrides, sources.image_var
        self.kube = Kube(sim.kubeconfig_path)
        self.pods: list[Pod] = []
        self._ips = iter(f"10.244.1.{n}" for n in range(10, 250))

    def publish(self, pod: Pod) -> None:
        for endpoints in endpoints_for(self.services, pod):
            name, namespace = endpoints["metadata"]["name"], endpoints["metadata"]["namespace"]
            try:
                self.kube.core.create_namespaced_endpoints(namespace, endpoints)
            except ApiException as exc:
                assert exc.status == 409, exc
                self.kube.core.replace_namespaced_endpoints(name, namespace, endpoints)

    def pod(self, component: str, doc: Doc, replica: int = 0) -> Pod:
        pod = prepare(component, doc, self.root, next(self._ips), self.sources, replica)
        self.pods.append(pod)
        return pod

    def run_job(self, doc: Doc, timeout: float = 300) -> Pod:
        pod = self.pod("migrate", doc)
        code = run_to_completion(pod, main_container(doc), self.image_var, timeout)
        assert code == 0, f"the migration Job failed ({code}):\n{pod.log_tail()}"
        return pod

    def bring_up(self, docs: dict[str, Doc]) -> dict[str, Readiness]:
        """Every Deployment's pod at once, as the kubelet would: initContainers, container, probes."""
        results: dict[str, Readiness] = {}

        def one(component: str, doc: Doc, replica: int) -> None:
            name = replica_name(component, replica)
            pod = self.pod(component, doc, replica)
            if pod.unmountable:  # the kubelet never starts its containers (ContainerCreating)
                results[name] = Readiness(component, False, 0, 0, [pod.unmountable])
                return
            for init in pod_spec(doc).get("initContainers", []):
                code = run_to_completion(pod, init, self.image_var, timeout=120)
                if code != 0:
                    results[name] = Readiness(component, False, 0, 0, [f"init {init['name']} exit {code}"])
                    return
            # The kubelet's startup budget counts from the container's start, after the initContainers.
            started = time.monotonic()
            start(pod, self.image_var)
            results[name] = wait_ready(pod, started)
            if results[name].ready:
                self.publish(pod)

        items = [
            (component, doc, replica)
            for component, doc in docs.items()
            for replica in range(int(doc["spec"].get("replicas", 1)) if component in REPLICATED else 1)
        ]
        threads = [threading.Thread(target=one, args=item) for item in items]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(400)
        return results

    def remove(self, component: str) -> None:
        """Stop the pods of ``component`` and forget them (a test's own, broken pods)."""
        pods = [pod for pod in self.pods if pod.component == component]
        stop(*pods)
        self.pods = [pod for pod in self.pods if pod.component != component]

    def log(self, component: str) -> str:
        return next(p for p in self.pods if p.component == component).log_tail()

    def stop(self) -> None:
        # The install's end, not a test of graceful shutdown: a short grace keeps the module's teardown
        # from waiting on a process that winds down slowly on a loaded machine.
        stop(*self.pods, grace=5)
        self.kube.close()


def install(
    sim: SimCluster,
    rendered: list[Doc],
    sources: tuple[str, RedisServer, Path],
    root: Path,
    pki: AdmissionPki,
    version: str = "1.27",
) -> tuple[Rehearsal, dict[str, Doc]]:
    """The operator's steps, then every pod's spec and environment read back from the cluster."""
    database_url, redis, image_var = sources
    kubectl_bin = kubectl(version)
    secret = {"SECRET_KEY": secrets.token_urlsafe(50), "PGPASSWORD": secrets.token_urlsafe(24)}
    operator_install(kubectl_bin, sim, rendered, secret, pki)
    # The operator guide's "Webhooks out": a receiver on the private network (the rehearsal's is on
    # loopback) is refused unless the ConfigMap allows private targets (apps/events/webhook_urls.py).
    patched = subprocess.run(
        [str(kubectl_bin), "--kubeconfig", sim.kubeconfig_path, "-n", NAMESPACE, "patch", "configmap",
         "recovery-control-plane", "--type=merge", "-p", json.dumps({"data": PRIVATE_RECEIVERS})],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr
    configmaps = cluster_configmaps(kubectl_bin, sim)
    assert configmaps["recovery-control-plane"] == {
        **of_kind(rendered, "ConfigMap")["recovery-control-plane"]["data"],
        **PRIVATE_RECEIVERS,
    }
    overrides = Overrides(
        database_url=database_url,
        redis_url=redis.url,
        clusterd_address=sim.grpc_address,
        kubeconfig_for=lambda account: own_kubeconfig(sim, account, root),
    )
    sources_ = Sources(configmaps, cluster_secrets(kubectl_bin, sim), overrides, image_var)
    assert sources_.secrets["recovery-control-plane"] == secret
    services = cluster_services(kubectl_bin, sim)
    return Rehearsal(root, sources_, sim, services), cluster_workloads(kubectl_bin, sim)


@dataclass
class Rehearsed:
    """One install, migrated and up: what the flow tests share."""

    sim: SimCluster
    rehearsal: Rehearsal
    found: dict[str, Doc]  # the workloads as the cluster stores them
    rendered: list[Doc]
    results: dict[str, Readiness]
    presets: set[str]


@pytest.fixture(scope="module")
def rehearsed(
    sim: SimCluster,
    fresh_database: str,
    redis_server: RedisServer,
    image_var: Path,
    pki: AdmissionPki,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Rehearsed]:
    rendered = render(OVERLAY, "1.27")
    root = tmp_path_factory.mktemp("rehearsal")
    rehearsal, found = install(sim, rendered, (fresh_database, redis_server, image_var), root, pki)
    try:
        # The Job first (operator guide step 5); the Deployments' initContainers wait for it anyway.
        rehearsal.run_job(found["migrate"])
        presets = builtin_presets(fresh_database)
        results = rehearsal.bring_up({name: found[name] for name in PROCESSES})
        yield Rehearsed(sim, rehearsal, found, rendered, results, presets)
    finally:
        rehearsal.stop()


def not_ready(results: dict[str, Readiness]) -> dict[str, list[str]]:
    return {name: r.answers[-3:] for name, r in results.items() if not r.ready or r.seconds > r.budget}


@pytest.mark.slow(seconds=90)  # the module (whole in one process) with its install: 35 s idle, 90 s busy
def test_a_fresh_install_comes_up_ready_with_the_builtin_presets(rehearsed: Rehearsed) -> None:
    assert rehearsed.presets == set(BUILTIN_PRESETS)
    results, rehearsal = rehearsed.results, rehearsed.rehearsal
    assert set(results) == set(PROCESSES) | {f"{name}-1" for name in REPLICATED}  # two replicas each
    problems = not_ready(results)
    assert problems == {}, "\n".join(
        f"{n}: {a}\n{rehearsal.log(n.split('-')[0])}" for n, a in problems.items()
    )
    for result in results.values():
        assert result.seconds <= result.budget
    # Each pod calls the cluster as its own ServiceAccount (a TokenRequest token over HTTPS).
    for name in PROCESSES:
        spec = pod_spec(rehearsed.found[name])
        pod = next(p for p in rehearsal.pods if p.component == name)
        if spec.get("automountServiceAccountToken"):
            assert pod.env["KUBECONFIG"].endswith(f"{spec['serviceAccountName']}.kubeconfig")
        else:  # beat, admission: no API token at all
            assert "KUBECONFIG" not in pod.env
    # Shown with -s: what the report and the operator guide quote.
    print({name: f"{r.seconds:.1f}s of {r.budget:.0f}s" for name, r in sorted(results.items())})


def scrape(pod: Pod, port: str) -> dict[str, list[Any]]:
    """A pod's metrics as Prometheus reads them (the PodMonitor's port), parsed: family -> samples."""
    from prometheus_client.parser import text_string_to_metric_families

    url = f"http://127.0.0.1:{pod.ports[port]}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


# A pool's processes (the worker's prefork children, the decider's shards) start serving after their
# fork, which the pod's readiness does not wait for: a worker is ready once its consumer is connected
# (apps/core/celery_heartbeat.py), and the pool forks beside it. Prometheus sees such a port down for
# one scrape and up on the next (every 30 s: deploy/monitoring/servicemonitor.yaml), so the
# check allows a port that long to come up, and names the pod, the port and its log if it never does.
PORT_UP_SECONDS = 30.0


def scrape_when_up(pod: Pod, port: str) -> dict[str, list[Any]]:
    def attempt() -> dict[str, list[Any]] | None:
        try:
            return scrape(pod, port)
        except OSError:  # refused (not listening yet) or reset; URLError is an OSError
            return None

    try:
        return wait_for(attempt, PORT_UP_SECONDS, f"{pod.root.name}'s port {port}", interval=0.2)
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}; its log:\n{pod.log_tail()}") from None


def holders_by_metrics(pods: list[Pod], kind: str) -> dict[str, list[str]]:
    """Cluster -> the pods whose main process reports holding its ``kind`` lease."""
    held: dict[str, list[str]] = {}
    for pod in pods:
        for sample in scrape(pod, "metrics").get("controlplane_leases_held", []):
            if sample.labels["lease"] == kind and sample.value >= 1:
                held.setdefault(sample.labels["cluster"], []).append(pod.root.name)
    return held


@pytest.mark.slow(seconds=5)
def test_every_monitored_pod_serves_metrics_and_each_cluster_is_held_by_one_replica(
    rehearsed: Rehearsed,
) -> None:
    """Every port the PodMonitor scrapes answers with metrics that parse, on every pod; of the two
    ingester and the two decider replicas, exactly one of each holds the cluster's lease, and each
    counts the other as a live member (the fair share's denominator)."""
    pods = [pod for pod in rehearsed.rehearsal.pods if pod.component in PROCESSES]
    scraped = 0
    for pod in pods:
        for port in [name for name in pod.ports if name.startswith("metrics")]:
            assert scrape_when_up(pod, port), (pod.root.name, port)
            scraped += 1
    monitored = {pod.component for pod in pods if "metrics" in pod.ports}
    assert monitored == {"ingester", "decider", "worker", "admission"}
    for component, kind in (("ingester", "ingest"), ("decider", "decide")):
        replicas = [pod for pod in pods if pod.component == component]
        assert len(replicas) == 2, component

        def split(replicas: list[Pod] = replicas, kind: str = kind) -> bool:
            held = holders_by_metrics(replicas, kind)
            members = [
                sample.value
                for pod in replicas
                for sample in scrape(pod, "metrics").get("controlplane_lease_members", [])
                if sample.labels["lease"] == kind
            ]
            return set(held) == {"default"} and all(len(h) == 1 for h in held.values()) and members == [2, 2]

        wait_for(split, 30, f"one {component} replica holding the cluster, both counted")
    print(f"{scraped} metrics ports scraped")


def admission_endpoints(rehearsed: Rehearsed) -> Any:
    """The webhook Service's Endpoints: where the built-in cluster sends the reviews."""
    found = rehearsed.rehearsal.kube.core.read_namespaced_endpoints("recovery-admission", NAMESPACE)
    return found.to_dict()["subsets"]


def broken(rehearsed: Rehearsed, component: str, readiness_path: str = "", tls_secret: str = "") -> Doc:
    """``component``'s Deployment with a readiness path or a serving Secret of its own (migrated already,
    so no initContainers; the probe every second, so the threshold fails fast)."""
    doc = copy.deepcopy(rehearsed.found[component])
    spec = doc["spec"]["template"]["spec"]
    spec["initContainers"] = []
    probe = spec["containers"][0]["readinessProbe"]
    if readiness_path:
        probe["httpGet"]["path"], probe["periodSeconds"] = readiness_path, 1
    if tls_secret:
        next(v for v in spec["volumes"] if v["name"] == "tls")["secret"]["secretName"] = tls_secret
    return doc


@pytest.mark.slow(seconds=12)
def test_a_wrong_probe_path_or_an_unissued_secret_fails_the_rehearsal(rehearsed: Rehearsed) -> None:
    """Typos a reviewer could miss: a readiness path the web or the webhook's probe port does not
    answer, a serving Secret nothing issues (renamed in deployment.yaml, not in certificate.yaml). None
    of these pods becomes Ready, so none is in a Service's Endpoints: the webhook gets no calls."""
    pods = {
        "web-typo": broken(rehearsed, "web", readiness_path="/ready"),
        "admission-typo": broken(rehearsed, "admission", readiness_path="/ready"),
        "admission-unissued": broken(rehearsed, "admission", tls_secret="recovery-admission-cert"),
    }
    before = admission_endpoints(rehearsed)
    try:
        results = rehearsed.rehearsal.bring_up(pods)  # at once: the three fail in parallel
    finally:
        for component in pods:
            rehearsed.rehearsal.remove(component)
    assert [name for name, result in results.items() if result.ready] == []
    assert any(a.startswith(("HTTP 400", "HTTP 404")) for a in results["web-typo"].answers)
    assert any(a.startswith("HTTP 404") for a in results["admission-typo"].answers)
    assert results["admission-unissued"].answers == [
        'MountVolume.SetUp failed for volume "tls" : secret "recovery-admission-cert" not found'
    ]
    assert admission_endpoints(rehearsed) == before


@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize(
    "version",
    ["1.27", "1.33"],
)
def test_the_operator_steps_apply_with_each_kubectl(version: str, pki: AdmissionPki) -> None:
    cluster = SimCluster(clock_speed=200, seed=3)
    cluster.start()
    try:
        secret = {"SECRET_KEY": secrets.token_urlsafe(50), "PGPASSWORD": secrets.token_urlsafe(24)}
        operator_install(kubectl(version), cluster, render(OVERLAY, version), secret, pki)
        configmaps = cluster_configmaps(kubectl(version), cluster)
        assert "REDIS_URL" in configmaps["recovery-control-plane"]
    finally:
        cluster.stop()


def test_the_install_steps_name_what_the_rehearsal_runs() -> None:
    """docs/operator-guide.md "Install on Kubernetes": every numbered step says which of the
    rehearsal's functions, fixtures or tests does it (``(rehearsal: `name`, ...)``), and each name is
    one here or in the rehearsal's support modules: the guide cannot drift from what is run."""
    from tests.support import rehearsal, rehearsal_admission, rehearsal_flows

    guide = (REPO / "docs" / "operator-guide.md").read_text()
    section = guide.split("## Install on Kubernetes", 1)[1].split("\n### ", 1)[0]
    steps = re.findall(r"^(\d+)\. \*\*", section, re.M)
    assert steps == [str(n) for n in range(1, len(steps) + 1)] and len(steps) >= 10, steps
    chunks = re.split(r"^\d+\. \*\*", section, flags=re.M)[1:]
    assert [n for n, chunk in zip(steps, chunks, strict=True) if "(rehearsal:" not in chunk] == []
    notes = re.findall(r"\(rehearsal:([^)]*)\)", section)
    scopes = [globals(), vars(rehearsal), vars(rehearsal_admission), vars(rehearsal_flows)]
    for name in (n for note in notes for n in re.findall(r"`([^`]+)`", note)):
        owner, _, attribute = name.partition(".")
        found = next((scope[owner] for scope in scopes if owner in scope), None)
        assert found is not None and (not attribute or hasattr(found, attribute)), name


# --- user flows through the rehearsed processes (issue #23 item 2, "then drive the user flows") ------
MANAGED = "default"  # the overlay's managed namespace (managed-namespaces.yaml)


@dataclass
class Flows:
    api: Api
    kube: Kube
    job: dict[str, Any]  # the adopted job as the API shows it
    admin: AdminSite  # the admin site, signed in as the same superuser


def web_api(rehearsed: Rehearsed) -> tuple[Api, AdminSite]:
    web = next(p for p in rehearsed.rehearsal.pods if p.component == "web")
    password = secrets.token_urlsafe(16)
    port = next(iter(web.ports.values()))
    api, admin = Api(port, issue_admin_token(web, password)), AdminSite(port)
    admin.sign_in("platform-admin", password)
    return api, admin


@pytest.fixture(scope="module")
def flows(rehearsed: Rehearsed) -> Iterator[Flows]:
    """Adoption: a user's AscendJob in the managed namespace shows up in the API (the ingester's work,
    as its own ServiceAccount)."""
    assert not_ready(rehearsed.results) == {}
    (api, admin), kube = web_api(rehearsed), Kube(rehearsed.sim.kubeconfig_path)
    name = f"rehearsed-{uuid.uuid4().hex[:6]}"
    create_job(kube, make_job(name, namespace=MANAGED))
    job = wait_for(lambda: api.job_named(MANAGED, name), 60, f"{name} adopted", interval=0.5)
    # The operator guide's check after the first administrator: the built-in presets, by the API.
    status, body, _ = api.call("GET", "presets/")
    assert status == 200, body
    listed = {p["name"] for p in (body["results"] if isinstance(body, dict) else body)}
    assert set(BUILTIN_PRESETS) <= listed, listed
    yield Flows(api, kube, job, admin)
    kube.close()


def all_logs(rehearsed: Rehearsed, since: dict[str, int] | None = None) -> dict[str, str]:
    """Every pod's log (from offset ``since[component]`` when given: what a test's own steps wrote)."""
    return {
        pod.component: pod.log_tail(10**8)[(since or {}).get(pod.component, 0) :]
        for pod in rehearsed.rehearsal.pods
    }


@pytest.mark.slow(seconds=10)
def test_save_push_preview_recreate_and_ingest_through_the_rehearsed_processes(
    rehearsed: Rehearsed, flows: Flows
) -> None:
    api, kube, job = flows.api, flows.kube, flows.job
    name, job_id = job["name"], job["id"]
    before = {component: len(log) for component, log in all_logs(rehearsed).items()}
    # Save → push: a new revision, pushed by the worker onto the AscendJob's annotations.
    status, body, headers = api.call("GET", f"jobs/{job_id}/policy/")
    assert status == 200, body
    status, body, _ = api.call(
        "PUT", f"jobs/{job_id}/policy/", {"spec": {"strategies": ["dump"]}}, {"If-Match": headers["etag"]}
    )
    assert status == 200, body

    def pushed() -> bool:
        live = kube.get_job(MANAGED, name) or {}
        return (live.get("metadata", {}).get("annotations") or {}).get(
            k.ANNOTATION_RECOVER_STRATEGY
        ) == "dump"

    wait_for(pushed, 60, "the policy pushed to the AscendJob")
    # Preview: a draft rendered against the live objects.
    status, body, _ = api.call("POST", f"jobs/{job_id}/policy/preview/", {"spec": {"strategies": ["retry"]}})
    assert status == 200 and body["valid"], body
    # Recreate: a new AscendJob (a new uid) with the current revision. 202 and an operation to follow
    # (durable recreate, run by the worker), or 200 when done at once (before that existed).
    old_uid = (kube.get_job(MANAGED, name) or {})["metadata"]["uid"]
    status, body, _ = api.call("POST", f"jobs/{job_id}/recreate/", {"confirm": name})
    assert status in (200, 202), body
    if status == 202:
        operation = wait_for(lambda: finished(api, body["status_url"]), 60, "the recreate finished", 0.5)
        assert operation["state"] == "done", operation
    wait_for(
        lambda: ((kube.get_job(MANAGED, name) or {}).get("metadata") or {}).get("uid") not in (None, old_uid),
        60,
        "the job recreated",
    )
    # Ingest: a fault in the (simulated) cluster becomes an event in the API.
    wait_for(lambda: "Running" in conditions(kube.get_job(MANAGED, name)), 60, "recreated job Running")
    rehearsed.sim.inject_fault(MANAGED, name, rank=0, recovers=True)

    def events() -> list[Any]:
        status, body, _ = api.call("GET", f"jobs/{job_id}/events/")
        assert status == 200, body
        return list(body["results"] if isinstance(body, dict) else body)

    wait_for(events, 60, "the fault's event in the API", interval=0.5)
    # No process was refused anything it needed by the cluster.
    refused = {c: forbidden_lines(log) for c, log in all_logs(rehearsed, before).items()}
    assert {c: lines for c, lines in refused.items() if lines} == {}


def finished(api: Api, status_url: str) -> dict[str, Any] | None:
    """The recreate operation at ``status_url`` once it has finished, else None."""
    status, body, _ = api.call("GET", status_url.removeprefix("/api/v1/"))
    assert status == 200, body
    return body if body["finished"] else None


def without_verb(rendered: list[Doc], role: str, resource: str, verb: str) -> Doc:
    """The rendered ClusterRole ``role`` with ``verb`` removed from its rule on ``resource``."""
    doc = copy.deepcopy(of_kind(rendered, "ClusterRole")[role])
    for rule in doc["rules"]:
        if resource in rule["resources"] and verb in rule["verbs"]:
            rule["verbs"].remove(verb)
            if not rule["verbs"]:  # a rule must name a verb: the rule goes
                doc["rules"].remove(rule)
            return doc
    raise AssertionError(f"{role} grants no {verb} on {resource}")


def kubectl_apply(sim: SimCluster, doc: Doc) -> None:
    path = Path(sim.kubeconfig_path).with_name(f"edited-{uuid.uuid4().hex[:6]}.yaml")
    path.write_text(yaml.safe_dump(doc))
    done = subprocess.run(
        [str(kubectl("1.27")), "--kubeconfig", sim.kubeconfig_path, "apply", "-f", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow(seconds=5)
def test_a_verb_removed_from_the_worker_role_fails_the_recreate_flow_with_a_403(
    rehearsed: Rehearsed, flows: Flows
) -> None:
    """deploy/ without ``delete`` on AscendJobs for the worker (who runs recreate): the recreate the user
    asked for is refused by the cluster, and the user sees why. (``delete``, not ``create``: a refused
    delete leaves the job as it was, so the shared install stays usable.)"""
    role = "mindcluster-recovery-worker-writes"
    kubectl_apply(rehearsed.sim, without_verb(rehearsed.rendered, role, "ascendjobs", "delete"))
    try:
        name = f"rehearsed-{uuid.uuid4().hex[:6]}"
        create_job(flows.kube, make_job(name, namespace=MANAGED))
        job = wait_for(lambda: flows.api.job_named(MANAGED, name), 60, f"{name} adopted", interval=0.5)
        status, body, _ = flows.api.call("POST", f"jobs/{job['id']}/recreate/", {"confirm": name})
        if status == 202:  # queued: the worker's attempt is refused, and the operation says so

            def refused() -> str:
                _, operation, _ = flows.api.call("GET", body["status_url"].removeprefix("/api/v1/"))
                return str(operation["last_error"]) if "forbidden" in str(operation).lower() else ""

            error = wait_for(refused, 60, "the recreate refused by the cluster", interval=0.5)
        else:
            assert status == 409 and body["errors"][0]["code"] == "recreate_failed", body
            error = json.dumps(body)
        assert "403" in error or "forbidden" in error.lower(), error
    finally:
        kubectl_apply(rehearsed.sim, of_kind(rehearsed.rendered, "ClusterRole")[role])


# --- admission, a platform-mode decision, a webhook out (issue #23 item 2) ---------------------------
PLATFORM_PRESET = "platform-mode"  # a built-in preset: the migration Job loaded it
# The platform-mode jobs run as v7.3, as in tests/decisions/platform_fixtures.py: from v26.0 a hardware
# fault in platform mode first gets preExitProcess, and whether ClusterD then asks the platform at all
# depends on the agent's timing (source facts D5, fault_recover_service.go:181-187); the flow under test
# is the decider pod answering on its own token, not that path. (As 26.1 the two decision tests
# failed together in one fresh-clone run: the question never came.)
PLATFORM_RELEASE = "7.3"


@dataclass
class Admitted:
    job: dict[str, Any]  # as the API shows it, once the ingester adopted it
    stored: dict[str, Any]  # the AscendJob as the cluster stored it, after the webhook


@pytest.fixture(scope="module")
def admitted(rehearsed: Rehearsed, flows: Flows) -> Iterator[Admitted]:
    """docs/operator-guide.md "Admission webhook", rollout: a namespace admin sets the namespace default
    (the built-in platform-mode preset) first, then the operator labels the namespace; then a user
    creates a job with no recovery keys of its own. Undone afterwards (the label, the default)."""
    api, kube = flows.api, flows.kube
    default_policy = f"clusters/{flows.job['cluster']}/namespaces/{MANAGED}/default-policy/"
    status, body, _ = api.call("PUT", default_policy, {"preset": PLATFORM_PRESET})
    assert status == 200, body
    kube.core.patch_namespace(MANAGED, {"metadata": {"labels": {MANAGED_LABEL: "true"}}})
    try:
        name = f"admitted-{uuid.uuid4().hex[:6]}"
        create_job(
            kube, make_job(name, namespace=MANAGED, strategies=None, workers=3, release=PLATFORM_RELEASE)
        )
        stored = kube.get_job(MANAGED, name) or {}
        job = wait_for(lambda: api.job_named(MANAGED, name), 60, f"{name} adopted", interval=0.5)
        yield Admitted(job, stored)
    finally:
        kube.core.patch_namespace(MANAGED, {"metadata": {"labels": {MANAGED_LABEL: None}}})
        api.call("DELETE", default_policy)


@pytest.mark.slow(seconds=5)
def test_a_job_created_in_a_namespace_with_a_default_policy_carries_it_and_is_revision_1(
    rehearsed: Rehearsed, flows: Flows, admitted: Admitted
) -> None:
    """The built-in cluster called the webhook pod through its Service (TLS, the injected caBundle, the
    API server's client certificate); the stored object carries the rendered default."""
    annotations = admitted.stored["metadata"].get("annotations") or {}
    spec = validate_policy(BUILTIN_PRESETS[PLATFORM_PRESET]).spec
    assert spec is not None
    assert annotations.get(ANNOTATION_ADMISSION_UID), (annotations, rehearsed.rehearsal.log("admission"))
    assert annotations.get(k.ANNOTATION_RECOVER_STRATEGY) == spec.strategy_annotation, annotations
    job_id = admitted.job["id"]

    def history() -> list[Any] | None:
        status, body, _ = flows.api.call("GET", f"jobs/{job_id}/policy/revisions/")
        assert status == 200, body
        return list(body["results"] if isinstance(body, dict) else body) or None

    revisions = wait_for(history, 30, "the admitted job's history", interval=0.5)
    assert [(r["number"], r["source"]) for r in revisions] == [(1, "admission")], revisions
    assert revisions[0]["spec"]["platform_mode"] is True


def decisions_of(api: Api, job_id: int) -> list[dict[str, Any]]:
    """The job's decisions in the API, the latest first."""
    status, body, _ = api.call("GET", "decisions/")
    assert status == 200, body
    return [d for d in (body["results"] if isinstance(body, dict) else body) if d["job"] == job_id]


def wait_decision(rehearsed: Rehearsed, api: Api, job_id: int, states: set[str]) -> dict[str, Any]:
    """The job's latest decision once it is in one of ``states``; on a timeout, what there was."""
    try:
        return dict(
            wait_for(
                lambda: next((d for d in decisions_of(api, job_id)[:1] if d["state"] in states), None),
                90,
                f"a {states} decision",
                interval=0.5,
            )
        )
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}: {decisions_of(api, job_id)}\n{rehearsed.rehearsal.log('decider')}"
        ) from None


@pytest.mark.slow(seconds=30)  # carries the admitted job's setup: 10-27 s on a loaded machine, then ~15 s
def test_a_platform_mode_fault_is_decided_by_the_decider_pod_and_sent_to_a_webhook(
    rehearsed: Rehearsed, flows: Flows, admitted: Admitted
) -> None:
    """The admitted job runs in platform mode: a fault in the built-in ClusterD is answered by the
    decider pod (on its own ServiceAccount token), the decision is in the API, and the worker pod sends
    the fault's incident to a webhook an administrator set in the admin site."""
    api, name, job_id = flows.api, admitted.job["name"], admitted.job["id"]
    before = {component: len(log) for component, log in all_logs(rehearsed).items()}
    receiver, secret = Receiver(), secrets.token_urlsafe(24)
    try:
        flows.admin.add(
            "events/webhook",
            {
                "name": "on-call",
                "namespace": MANAGED,
                "url": receiver.url,
                "secret": secret,
                "events": json.dumps(["incident.opened"]),
                "active": "on",
            },
        )
        rehearsed.sim.inject_fault(MANAGED, name, rank=1, fault_type="uce", recovers=True)

        decision = wait_decision(rehearsed, api, job_id, {"completed"})
        assert (decision["strategy"], decision["decided_by"]) == ("retry", "rule:0"), decision
        delivered = wait_for(lambda: receiver.received or None, 60, "the incident at the webhook", 0.5)
        headers, body = delivered[0]
        message = json.loads(body)
        assert message["kind"] == "incident.opened" and message["job"]["name"] == name, message
        assert verify(secret, headers["X-Timestamp"], body, headers["X-Signature"])
    finally:
        receiver.stop()
    refused = {c: forbidden_lines(log) for c, log in all_logs(rehearsed, before).items()}
    assert {c: lines for c, lines in refused.items() if lines} == {}


@pytest.mark.slow(seconds=8)
def test_a_verb_removed_from_the_decider_role_fails_the_decision_flow(
    rehearsed: Rehearsed, flows: Flows, admitted: Admitted
) -> None:
    """deploy/ without ``patch`` on PodGroups for the decider: its answer to ClusterD's question is
    refused by the cluster, and the decision in the API says so (failed, the 403 as its last error)
    instead of completing."""
    role = "mindcluster-recovery-decider-writes"
    kubectl_apply(rehearsed.sim, without_verb(rehearsed.rendered, role, "podgroups", "patch"))
    try:
        name = f"admitted-{uuid.uuid4().hex[:6]}"
        create_job(
            flows.kube,
            make_job(name, namespace=MANAGED, strategies=None, workers=3, release=PLATFORM_RELEASE),
        )
        job = wait_for(lambda: flows.api.job_named(MANAGED, name), 60, f"{name} adopted", interval=0.5)
        rehearsed.sim.inject_fault(MANAGED, name, rank=1, fault_type="uce", recovers=True)
        decision = wait_decision(rehearsed, flows.api, job["id"], {"failed", "completed"})
        assert decision["state"] == "failed", decision
        assert "403" in decision["last_error"] or "forbidden" in decision["last_error"].lower(), decision
    finally:
        kubectl_apply(rehearsed.sim, of_kind(rehearsed.rendered, "ClusterRole")[role])
