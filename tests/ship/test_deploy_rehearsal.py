"""Deploy rehearsal (issue #23 item 2): deploy/ comes up and serves its users, as a platform team runs it.

The sequence is docs/operator-guide.md "Install", step by step: render the quickstart overlay with
``kubectl kustomize``; create the namespace and the operator's Secret and apply the overlay with kubectl
(validated against the built-in cluster's OpenAPI, 1.27 and 1.33) to the built-in cluster, which stores
every kind and enforces RBAC; read every Deployment, Job, ConfigMap and Secret back from the cluster;
run the migration Job; start every Deployment (its initContainer first) as local processes with exactly
its pod's environment and a TokenRequest token of its own ServiceAccount (tests/support/rehearsal.py
says what is mapped); probe each the way the kubelet does; every pod must be Ready within its startup
budget. Then the user flows through the web process's API (adoption, save → push, preview, recreate,
ingest) with no 403 in any log, and a verb removed from a role makes the recreate flow fail.

One install per module (``rehearsed``); the tests that change something undo it. Not here yet: the
admission webhook's pod (TLS Secret, client CA, ``--probe-port``, and the built-in cluster calling it
through its Service) and a platform-mode decision through the decider.
"""

from __future__ import annotations

import copy
import json
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml

from apps.policies.builtin_presets import BUILTIN_PRESETS
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
    run_to_completion,
    start,
    stop,
    wait_ready,
)
from tests.support.rehearsal_flows import Api, forbidden_lines, issue_admin_token
from tests.support.sim import conditions, create_job, make_job

NAMESPACE = "mindcluster-recovery"
OVERLAY = "quickstart"
# The processes the rehearsal starts. Admission needs its TLS Secret (cert-manager's): a later part.
PROCESSES = ("web", "worker", "beat", "ingester", "decider")
# cert-manager's kinds: the built-in cluster has no cert-manager (nor do many real ones, see the guide).
NO_CRD = "cert-manager.io/"


def own_kubeconfig(sim: SimCluster, service_account: str, workdir: Path) -> Path:
    """The kubeconfig of ServiceAccount ``service_account``: a TokenRequest token, over the HTTPS port,
    so the process calling with it can do exactly what deploy/ grants that ServiceAccount."""
    return service_account_kubeconfig(
        sim.kubeconfig_path, NAMESPACE, service_account, workdir / f"{service_account}.kubeconfig"
    )


@pytest.fixture(scope="module")
def sim() -> Iterator[SimCluster]:
    """The install's own cluster, not the process's shared one: it creates a namespace and Secrets of
    fixed names, and under xdist a module's fixtures may be set up more than once in one process."""
    with SimCluster(seed=23, control_port=0) as cluster:
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


def operator_install(kubectl_bin: Path, sim: SimCluster, rendered: list[Doc], secret: dict[str, str]) -> str:
    """docs/operator-guide.md "Install" steps 2-4: namespace, Secret, apply. Returns kubectl's output."""

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [str(kubectl_bin), "--kubeconfig", sim.kubeconfig_path, *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    created = run("create", "namespace", NAMESPACE, "--save-config")
    assert created.returncode == 0 or "AlreadyExists" in created.stderr, created.stderr  # a re-run
    literals = [f"--from-literal={key}={value}" for key, value in secret.items()]
    made = run("-n", NAMESPACE, "create", "secret", "generic", "recovery-control-plane", *literals)
    assert made.returncode == 0, made.stderr
    manifest = Path(sim.kubeconfig_path).with_name(f"rendered-{uuid.uuid4().hex[:6]}.yaml")
    manifest.write_text(yaml.safe_dump_all([d for d in rendered if not d["apiVersion"].startswith(NO_CRD)]))
    # Validated against the cluster's OpenAPI, as kubectl does by default.
    applied = run("apply", "-f", str(manifest))
    assert applied.returncode == 0 and applied.stderr.strip() == "", applied.stderr
    return applied.stdout


def cluster_configmaps(kubectl_bin: Path, sim: SimCluster) -> dict[str, dict[str, str]]:
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "configmaps")
    return {item["metadata"]["name"]: dict(item.get("data") or {}) for item in listed["items"]}


def cluster_secrets(kubectl_bin: Path, sim: SimCluster) -> dict[str, dict[str, str]]:
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "secrets")
    return {item["metadata"]["name"]: decode_secret(item) for item in listed["items"]}


def cluster_workloads(kubectl_bin: Path, sim: SimCluster) -> dict[str, Doc]:
    """The Deployments and the migration Job as the cluster stores them (what a kubelet would run)."""
    listed = kubectl_json(kubectl_bin, sim.kubeconfig_path, "-n", NAMESPACE, "get", "deployments,jobs")
    return workloads(listed["items"])


def builtin_presets(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM policies_preset WHERE builtin")}


class Rehearsal:
    """Pods started from the rendered overlay; stop() ends every one of them."""

    def __init__(self, root: Path, sources: Sources) -> None:
        self.root, self.sources = root, sources
        self.overrides, self.image_var = sources.overrides, sources.image_var
        self.pods: list[Pod] = []
        self._ips = iter(f"10.244.1.{n}" for n in range(10, 250))

    def pod(self, component: str, doc: Doc) -> Pod:
        pod = prepare(component, doc, self.root, next(self._ips), self.sources)
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

        def one(component: str, doc: Doc) -> None:
            pod = self.pod(component, doc)
            for init in pod_spec(doc).get("initContainers", []):
                code = run_to_completion(pod, init, self.image_var, timeout=120)
                if code != 0:
                    results[component] = Readiness(
                        component, False, 0, 0, [f"init {init['name']} exit {code}"]
                    )
                    return
            # The kubelet's startup budget counts from the container's start, after the initContainers.
            started = time.monotonic()
            start(pod, self.image_var)
            results[component] = wait_ready(pod, started)

        threads = [threading.Thread(target=one, args=item) for item in docs.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(400)
        return results

    def log(self, component: str) -> str:
        return next(p for p in self.pods if p.component == component).log_tail()

    def stop(self) -> None:
        for pod in self.pods:
            stop(pod)


def install(
    sim: SimCluster,
    rendered: list[Doc],
    sources: tuple[str, RedisServer, Path],
    root: Path,
    version: str = "1.27",
) -> tuple[Rehearsal, dict[str, Doc]]:
    """The operator's steps, then every pod's spec and environment read back from the cluster."""
    database_url, redis, image_var = sources
    kubectl_bin = kubectl(version)
    secret = {"SECRET_KEY": secrets.token_urlsafe(50), "PGPASSWORD": secrets.token_urlsafe(24)}
    operator_install(kubectl_bin, sim, rendered, secret)
    configmaps = cluster_configmaps(kubectl_bin, sim)
    assert (
        configmaps["recovery-control-plane"]
        == of_kind(rendered, "ConfigMap")["recovery-control-plane"]["data"]
    )
    overrides = Overrides(
        database_url=database_url,
        redis_url=redis.url,
        clusterd_address=sim.grpc_address,
        kubeconfig_for=lambda account: own_kubeconfig(sim, account, root),
    )
    sources_ = Sources(configmaps, cluster_secrets(kubectl_bin, sim), overrides, image_var)
    assert sources_.secrets["recovery-control-plane"] == secret
    return Rehearsal(root, sources_), cluster_workloads(kubectl_bin, sim)


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
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Rehearsed]:
    rendered = render(OVERLAY, "1.27")
    root = tmp_path_factory.mktemp("rehearsal")
    rehearsal, found = install(sim, rendered, (fresh_database, redis_server, image_var), root)
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
    assert set(results) == set(PROCESSES)
    problems = not_ready(results)
    assert problems == {}, "\n".join(f"{n}: {a}\n{rehearsal.log(n)}" for n, a in problems.items())
    for result in results.values():
        assert result.seconds <= result.budget
    # Each pod calls the cluster as its own ServiceAccount (a TokenRequest token over HTTPS).
    for name in PROCESSES:
        spec = pod_spec(rehearsed.found[name])
        pod = next(p for p in rehearsal.pods if p.component == name)
        if spec.get("automountServiceAccountToken"):
            assert pod.env["KUBECONFIG"].endswith(f"{spec['serviceAccountName']}.kubeconfig")
    # Shown with -s: what the report and the operator guide quote.
    print({name: f"{r.seconds:.1f}s of {r.budget:.0f}s" for name, r in sorted(results.items())})


@pytest.mark.slow(seconds=8)
def test_a_wrong_probe_path_fails_the_rehearsal(rehearsed: Rehearsed) -> None:
    web = copy.deepcopy(rehearsed.found["web"])
    container = web["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"]["httpGet"]["path"] = "/ready"  # a typo a reviewer could miss
    container["readinessProbe"]["periodSeconds"] = 1  # fail fast: the threshold still counts
    web["spec"]["template"]["spec"]["initContainers"] = []  # migrated already
    results = rehearsed.rehearsal.bring_up({"web-typo": web})
    assert not results["web-typo"].ready
    answers = results["web-typo"].answers
    assert any(answer.startswith("HTTP 400") or answer.startswith("HTTP 404") for answer in answers)


@pytest.mark.slow(seconds=15)
@pytest.mark.parametrize(
    "version",
    ["1.27", "1.33"],
)
def test_the_operator_steps_apply_with_each_kubectl(version: str) -> None:
    cluster = SimCluster(clock_speed=200, seed=3)
    cluster.start()
    try:
        secret = {"SECRET_KEY": secrets.token_urlsafe(50), "PGPASSWORD": secrets.token_urlsafe(24)}
        operator_install(kubectl(version), cluster, render(OVERLAY, version), secret)
        configmaps = cluster_configmaps(kubectl(version), cluster)
        assert "REDIS_URL" in configmaps["recovery-control-plane"]
    finally:
        cluster.stop()


# --- user flows through the rehearsed processes (issue #23 item 2, "then drive the user flows") ------
MANAGED = "default"  # the overlay's managed namespace (managed-namespaces.yaml)


@dataclass
class Flows:
    api: Api
    kube: Kube
    job: dict[str, Any]  # the adopted job as the API shows it


def web_api(rehearsed: Rehearsed) -> Api:
    web = next(p for p in rehearsed.rehearsal.pods if p.component == "web")
    return Api(next(iter(web.ports.values())), issue_admin_token(web))


@pytest.fixture(scope="module")
def flows(rehearsed: Rehearsed) -> Iterator[Flows]:
    """Adoption: a user's AscendJob in the managed namespace shows up in the API (the ingester's work,
    as its own ServiceAccount)."""
    assert not_ready(rehearsed.results) == {}
    api, kube = web_api(rehearsed), Kube(rehearsed.sim.kubeconfig_path)
    name = f"rehearsed-{uuid.uuid4().hex[:6]}"
    create_job(kube, make_job(name, namespace=MANAGED))
    job = wait_for(lambda: api.job_named(MANAGED, name), 60, f"{name} adopted", interval=0.5)
    yield Flows(api, kube, job)
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
