"""The shipping files are valid: docker-compose.yml for Compose, deploy/ (kustomize overlays) for Kubernetes.

The overlays are read as ``kubectl kustomize`` renders them (tests/support/deploy.py), since that is
what an operator applies. What the pods need at run time is proven by tests/ship/test_deploy_rehearsal.py.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from urllib.parse import urlsplit

import pytest
import yaml

from tests.support.deploy import (
    CLAIMED_VERSIONS,
    DEPLOY,
    LONG_RUNNING,
    OVERLAYS,
    REPO,
    Doc,
    component,
    main_container,
    of_kind,
    pod_spec,
    render,
    workloads,
)

NAMESPACE = "mindcluster-recovery"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kubectl_127_and_133_render_the_same_objects(overlay: str) -> None:
    key = lambda d: (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])  # noqa: E731
    assert sorted(render(overlay, "1.27"), key=key) == sorted(render(overlay, "1.33"), key=key)


def unique_objects() -> list[Doc]:
    """Both overlays' objects, each distinct one once (most of production is in quickstart too)."""
    seen: dict[str, Doc] = {}
    for overlay in OVERLAYS:
        for doc in render(overlay):
            seen.setdefault(yaml.safe_dump(doc, sort_keys=True), doc)
    return list(seen.values())


# Both ends of the claimed range and the middle: every kind used is GA (v1) throughout, so these three
# catch a field added or removed in between; each call costs seconds of schema loading.
@pytest.mark.slow(seconds=10)
@pytest.mark.parametrize("version", [CLAIMED_VERSIONS[0], "1.30", CLAIMED_VERSIONS[-1]])
def test_every_object_validates_against_the_claimed_kubernetes_versions(version: str) -> None:
    import kubernetes_validate

    for doc in unique_objects():
        if doc["apiVersion"].startswith("cert-manager.io/"):
            continue  # cert-manager's CRDs: not in the built-in schema (tests/admission/test_deploy.py)
        kubernetes_validate.validate(doc, f"{version}.0", strict=True)


def test_the_ingress_example_validates() -> None:
    import kubernetes_validate

    doc = yaml.safe_load((DEPLOY / "examples" / "ingress.yaml").read_text())
    for version in CLAIMED_VERSIONS:
        kubernetes_validate.validate(doc, f"{version}.0", strict=True)
    assert (
        doc["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]["name"] == "recovery-control-plane"
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_process_runs_in_its_own_deployment_and_the_migration_job(overlay: str) -> None:
    docs = render(overlay)
    found = workloads(docs)
    assert set(found) == {*LONG_RUNNING, "migrate"}
    assert found["migrate"]["kind"] == "Job"
    assert main_container(found["migrate"])["command"] == ["python", "manage.py", "migrate", "--noinput"]
    for name, doc in found.items():
        pod = pod_spec(doc)
        assert pod["serviceAccountName"] == f"recovery-{name}"
        sources = main_container(doc)["envFrom"]
        assert {"configMapRef", "secretRef"} == {key for source in sources for key in source}
        if name != "migrate":  # the Deployments start only once the Job has migrated
            (init,) = pod["initContainers"]
            assert "manage.py migrate --check" in " ".join(init["command"])
            assert init["envFrom"] == sources


# What each process's ServiceAccount may do: (namespace or "*" for cluster-wide, group, resource) -> verbs.
# From the calls each process makes (deploy/base/rbac.yaml explains each line). Recreate creates and
# deletes AscendJobs in the worker (apps/cluster/client.py create_ascendjob / delete_ascendjob, called by
# the Celery task of apps/admission/recreate_ops.py; the web only records the operation).
def expected_grants(managed: str) -> dict[str, dict[tuple[str, str, str], set[str]]]:
    return {
        "recovery-web": {
            ("*", "mindxdl.gitee.com", "ascendjobs"): {"get"},
            ("*", "scheduling.volcano.sh", "podgroups"): {"get"},
            (managed, "scheduling.volcano.sh", "podgroups"): {"patch"},
            (managed, "", "configmaps"): {"get"},
        },
        "recovery-worker": {
            ("*", "mindxdl.gitee.com", "ascendjobs"): {"get", "list"},
            ("*", "scheduling.volcano.sh", "podgroups"): {"get", "list"},
            (managed, "mindxdl.gitee.com", "ascendjobs"): {"patch", "create", "delete"},
            (managed, "scheduling.volcano.sh", "podgroups"): {"patch"},
            (managed, "", "configmaps"): {"get", "create", "update", "delete"},
        },
        "recovery-ingester": {
            ("*", "mindxdl.gitee.com", "ascendjobs"): {"get", "list", "watch"},
            ("*", "scheduling.volcano.sh", "podgroups"): {"list", "watch"},
            ("*", "", "configmaps"): {"list", "watch"},
            ("*", "", "events"): {"list", "watch"},
        },
        "recovery-decider": {
            ("*", "scheduling.volcano.sh", "podgroups"): {"get", "list", "watch"},
            (managed, "scheduling.volcano.sh", "podgroups"): {"patch"},
            (managed, "", "configmaps"): {"get"},
        },
    }


def granted(docs: list[Doc]) -> dict[str, dict[tuple[str, str, str], set[str]]]:
    roles = of_kind(docs, "ClusterRole")
    out: dict[str, dict[tuple[str, str, str], set[str]]] = defaultdict(lambda: defaultdict(set))
    for doc in docs:
        if doc["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        assert doc["roleRef"]["kind"] == "ClusterRole"
        scope = "*" if doc["kind"] == "ClusterRoleBinding" else doc["metadata"]["namespace"]
        for subject in doc["subjects"]:
            assert (subject["kind"], subject["namespace"]) == ("ServiceAccount", NAMESPACE)
            for rule in roles[doc["roleRef"]["name"]]["rules"]:
                assert "resourceNames" not in rule
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        out[subject["name"]][(scope, group, resource)] |= set(rule["verbs"])
    return {name: dict(grants) for name, grants in out.items()}


@pytest.mark.parametrize(("overlay", "managed"), [("production", "team-a"), ("quickstart", "default")])
def test_each_process_is_granted_exactly_what_its_code_calls(overlay: str, managed: str) -> None:
    grants = granted(render(overlay))
    assert grants == expected_grants(managed)
    assert all("*" not in verbs for per_sa in grants.values() for verbs in per_sa.values())
    # Every write is namespaced to a managed namespace; nothing cluster-wide changes anything.
    writes = {"create", "update", "patch", "delete", "deletecollection"}
    for per_sa in grants.values():
        for (scope, _, _), verbs in per_sa.items():
            assert scope != "*" or not verbs & writes


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_processes_that_call_the_api_get_a_token(overlay: str) -> None:
    docs = render(overlay)
    accounts = of_kind(docs, "ServiceAccount")
    for name, doc in workloads(docs).items():
        pod = pod_spec(doc)
        account = accounts[pod["serviceAccountName"]]
        needs_api = name in ("web", "worker", "ingester", "decider")
        assert pod["automountServiceAccountToken"] is needs_api, name
        assert account.get("automountServiceAccountToken", True) is needs_api, name
    for doc in of_kind(docs, "StatefulSet").values():
        assert pod_spec(doc)["automountServiceAccountToken"] is False


def restricted_problems(pod: Doc) -> list[str]:
    """Where the pod breaks Pod Security "restricted" (or our read-only-root rule)."""
    problems = []
    security = pod.get("securityContext", {})
    if security.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append("pod seccompProfile")
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        context = container.get("securityContext", {})
        name = container["name"]
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation")
        if context.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append(f"{name}: capabilities")
        if not (context.get("runAsNonRoot") or security.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if context.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem")
    return problems


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_pod_meets_pod_security_restricted_with_a_read_only_root(overlay: str) -> None:
    docs = render(overlay)
    namespace = of_kind(docs, "Namespace")[NAMESPACE]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = [d for d in docs if d["kind"] in ("Deployment", "StatefulSet", "Job")]
    assert {component(d) for d in pods if "app.kubernetes.io/component" in d["metadata"]["labels"]} == {
        *LONG_RUNNING,
        "migrate",
    }
    for doc in pods:
        assert restricted_problems(pod_spec(doc)) == [], doc["metadata"]["name"]
    for name, doc in workloads(docs).items():
        mounts = {m["mountPath"]: m["name"] for m in main_container(doc)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec(doc)["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], name  # heartbeats, beat's schedule, temp files


def probe_target(probe: Doc) -> tuple[str, ...]:
    if "httpGet" in probe:
        return ("http", probe["httpGet"]["path"])
    return tuple(probe["exec"]["command"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_long_running_process_has_startup_readiness_and_liveness_probes(overlay: str) -> None:
    for name, doc in workloads(render(overlay)).items():
        if name == "migrate":
            continue
        container = main_container(doc)
        probes = {kind: container[f"{kind}Probe"] for kind in ("startup", "readiness", "liveness")}
        if name in ("web", "admission"):
            # Liveness never touches a dependency: a database outage must not restart every pod.
            assert probe_target(probes["startup"]) == ("http", "/livez")
            assert probe_target(probes["liveness"]) == ("http", "/livez")
            assert probe_target(probes["readiness"]) == ("http", "/readyz")
        else:
            for probe in probes.values():
                assert probe_target(probe)[:5] == ("python", "-m", "apps.core.heartbeat", "check", name)
                assert probe["timeoutSeconds"] >= 5  # a Python start, however slow the node
        budget = probes["startup"]["periodSeconds"] * probes["startup"]["failureThreshold"]
        assert 30 <= budget <= 300, name


def test_quickstart_points_redis_and_postgres_at_services_it_creates() -> None:
    docs = render("quickstart")
    config = of_kind(docs, "ConfigMap")["recovery-control-plane"]["data"]
    services = of_kind(docs, "Service")
    for key, port in (("REDIS_URL", 6379), ("DATABASE_URL", 5432)):
        url = urlsplit(config[key])
        assert url.hostname in services, key
        assert port in {p["port"] for p in services[str(url.hostname)]["spec"]["ports"]}
        assert url.password is None  # the password is PGPASSWORD in the operator's Secret
    assert set(of_kind(docs, "StatefulSet")) == {"recovery-postgres", "recovery-redis"}


def test_production_takes_every_datastore_url_from_the_secret() -> None:
    docs = render("production")
    config = of_kind(docs, "ConfigMap")["recovery-control-plane"]["data"]
    assert not {"REDIS_URL", "DATABASE_URL", "SECRET_KEY"} & set(config)
    assert "Secret" not in {d["kind"] for d in docs}  # created by the operator, never shipped
    assert not of_kind(docs, "StatefulSet")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_disruption_budgets_and_network_policies(overlay: str) -> None:
    docs = render(overlay)
    budgets = {component_of_selector(d): d for d in of_kind(docs, "PodDisruptionBudget").values()}
    assert set(budgets) == {"web", "admission", "decider", "ingester"}
    policies = list(of_kind(docs, "NetworkPolicy").values())
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert deny and deny[0]["spec"]["policyTypes"] == ["Ingress"] and "ingress" not in deny[0]["spec"]
    by_target = {component_of_selector(p): p for p in policies if p["spec"]["podSelector"]}
    assert by_target["admission"]["spec"]["ingress"] == [{"ports": [{"port": 8443, "protocol": "TCP"}]}]
    assert by_target["web"]["spec"]["ingress"] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    (scrape,) = [p for p in policies if p["metadata"]["name"] == "recovery-metrics"]
    assert scrape["spec"]["ingress"] == [
        {"ports": [{"port": port, "protocol": "TCP"} for port in (9100, 9101, 9102)]}
    ]
    for store in ("recovery-postgres", "recovery-redis"):
        if store in by_target:
            (rule,) = by_target[store]["spec"]["ingress"]
            assert rule["from"] == [
                {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "recovery-control-plane"}}}
            ]


def selected_components(selector: Doc) -> set[str]:
    """The components a label selector picks (matchLabels or an ``In`` expression)."""
    if "app.kubernetes.io/component" in selector.get("matchLabels", {}):
        return {selector["matchLabels"]["app.kubernetes.io/component"]}
    return {
        value
        for expression in selector.get("matchExpressions", [])
        if expression["key"] == "app.kubernetes.io/component" and expression["operator"] == "In"
        for value in expression["values"]
    }


# The processes that serve their metrics on METRICS_PORT (+ 1 + n for a pool's process n): the
# PodMonitor's targets. The web tier serves /metrics on its http port (the ServiceMonitor).
PORT_SCRAPED = {"ingester": 0, "decider": 2, "worker": 2, "admission": 0}  # component -> pool processes


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_monitored_process_serves_metrics_on_a_port_prometheus_may_reach(overlay: str) -> None:
    """Each process the PodMonitor selects sets METRICS_PORT, names it `metrics` (and its pool's
    `metrics-pool-n`, as many as it runs), and a NetworkPolicy admits those ports to it."""
    docs = render(overlay)
    monitors = [*yaml.safe_load_all((DEPLOY / "monitoring" / "servicemonitor.yaml").read_text())]
    (pods,) = [m for m in monitors if m["kind"] == "PodMonitor"]
    assert selected_components(pods["spec"]["selector"]) == set(PORT_SCRAPED)
    scraped = {endpoint["port"] for endpoint in pods["spec"]["podMetricsEndpoints"]}
    policies = [p for p in of_kind(docs, "NetworkPolicy").values() if p["spec"]["podSelector"]]
    found = workloads(docs)
    for name, pool in PORT_SCRAPED.items():
        container = main_container(found[name])
        env = {item["name"]: item.get("value") for item in container.get("env", [])}
        ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
        base = int(env["METRICS_PORT"])
        expected = {"metrics": base, **{f"metrics-pool-{n}": base + 1 + n for n in range(pool)}}
        assert {k: v for k, v in ports.items() if k.startswith("metrics")} == expected, name
        assert set(expected) <= scraped, name
        if name == "decider":
            command = container["command"]
            assert int(command[command.index("--processes") + 1]) == pool
        if name == "worker":
            command = container["command"]
            assert int(command[command.index("-c") + 1]) == pool
        admitted = {
            rule_port["port"]
            for policy in policies
            if name in selected_components(policy["spec"]["podSelector"])
            for rule in policy["spec"].get("ingress", [])
            for rule_port in rule.get("ports", [])
        }
        assert set(expected.values()) <= admitted, (name, admitted)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_ingester_and_the_decider_run_two_replicas_rolling(overlay: str) -> None:
    """Leases per cluster make two at once safe (apps/core/leases.py): two replicas each, rolled one
    new pod at a time with none taken away first, and a budget that keeps one through a drain."""
    docs = render(overlay)
    found = workloads(docs)
    for name in ("ingester", "decider"):
        spec = found[name]["spec"]
        assert spec["replicas"] == 2, name
        assert spec["strategy"] == {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
        }, name
    assert found["beat"]["spec"]["strategy"] == {"type": "Recreate"}  # two beats would schedule twice


def component_of_selector(doc: Doc) -> str:
    labels = doc["spec"].get("selector", doc["spec"].get("podSelector", {})).get("matchLabels", {})
    return str(labels.get("app.kubernetes.io/component") or labels.get("app.kubernetes.io/name"))


def test_docker_compose_file_is_valid() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose (Debian package docker-compose) is not installed; .ci/run installs it")
    result = subprocess.run(
        [binary, "-f", str(REPO / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"SECRET_KEY": "x" * 50, "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr


def test_docker_compose_runs_every_process_with_health_checks() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "ingester", "decider", "simcluster"} <= set(
        services
    )
    for name in ("postgres", "redis", "web", "worker", "beat", "ingester", "decider", "simcluster"):
        assert "healthcheck" in services[name], name
    for name in ("worker", "beat", "ingester", "decider"):
        assert services[name]["healthcheck"]["test"][1:5] == ["python", "-m", "apps.core.heartbeat", "check"]
    assert {"pgdata", "redisdata", "kube"} <= set(compose["volumes"])
