"""Simulated TaskD managers: which recovery strategies a job's TaskD/MindIO would report.

What ``ReportRecoverStrategy`` carries depends on how the pods were set up (mindcluster.md §3.3, §4,
§5, §10.1); ``evaluate_support`` encodes those rules as a pure function over the job, its pods and
its ``manager.py``, and returns the reasons so a misconfigured job's fallback can be explained.

On the wire the agent speaks its own words: ``retry``, ``recover``, ``dump``, ``downgrade``
(TaskD forwards MindIO's list unchanged, component/taskd/taskd/python/framework/manager/controller.py:
239-250; ClusterD matches elastic-training against ``downgrade``, component/clusterd/pkg/common/
constant/const.go:53). ``agent_report`` gives that list. MindIO itself is closed source, so a test
can ``script`` what the agent reports and the ReportRecoverStatus code of each attempt.
"""

from __future__ import annotations

import ast
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from mindcluster import keys as k
from mindcluster.ascendjob import JobContext
from mindcluster.clusterd import agent_words
from mindcluster.operator_env import operator_injects_env
from mindcluster.releases import release_at_least
from mindcluster.strategies import STRATEGY_SINCE
from simcluster.kube import Kube
from simcluster.operator import job_release

ALL_STRATEGIES = frozenset(STRATEGY_SINCE)
EVENT_INIT_FAILED = "TaskDInitFailed"
UNKNOWN = "<expr>"  # a manager.py value that is not a literal
EVENT_CONFIG_MISMATCH = "TaskDConfigMismatch"
EVENT_CONTROLLER_NOT_STARTED = "MindIOControllerNotStarted"


@dataclass
class SupportReport:
    """Strategies TaskD would report, why others are missing, and problems worth an Event."""

    supported: set[str]
    reasons: list[str] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (event reason, message)


def _ascend(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or []
    return next((c for c in containers if c.get("name") == k.CONTAINER_NAME), {})


def _env(pod: Mapping[str, Any]) -> dict[str, str | None]:
    """Env of the ascend container; valueFrom entries map to None (set, value known only at run time)."""
    env: dict[str, str | None] = {}
    for entry in _ascend(pod).get("env") or []:
        env[str(entry.get("name"))] = entry.get("value") if "value" in entry else None
    return env


def _port_names(pod: Mapping[str, Any]) -> dict[str, int]:
    return {str(p.get("name")): int(p.get("containerPort", 0)) for p in _ascend(pod).get("ports") or []}


def parse_manager_config(source: str) -> dict[str, Any] | None:
    """The literal dict passed to ``init_taskd_manager({...})`` in manager.py, or None if absent.

    Names bound to a literal at module level (``node_nums = 3``) are resolved; other expressions
    (``os.getenv(...)``) are returned as ``UNKNOWN`` because only running the script would tell.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    constants: dict[str, Any] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                try:
                    constants[target.id] = ast.literal_eval(statement.value)
                except ValueError:
                    constants.pop(target.id, None)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", getattr(node.func, "attr", None)) == "init_taskd_manager"
            and node.args
            and isinstance(node.args[0], ast.Dict)
        ):
            config: dict[str, Any] = {}
            for key_node, value_node in zip(node.args[0].keys, node.args[0].values, strict=False):
                if not isinstance(key_node, ast.Constant):
                    continue
                if isinstance(value_node, ast.Name):
                    config[str(key_node.value)] = constants.get(value_node.id, UNKNOWN)
                    continue
                try:
                    config[str(key_node.value)] = ast.literal_eval(value_node)
                except ValueError:
                    config[str(key_node.value)] = UNKNOWN
            return config
    return None


def evaluate_support(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], manager_py: str | None = None
) -> SupportReport:
    """The strategies a job's TaskD/MindIO would report, with the reasons for every missing one."""
    release = job_release(job)
    framework = ((job.get("metadata") or {}).get("labels") or {}).get(k.LABEL_FRAMEWORK)
    report = SupportReport(supported=set(ALL_STRATEGIES))
    supported = report.supported

    def drop(names: set[str] | frozenset[str], why: str) -> None:
        lost = supported & set(names)
        if lost:
            supported.difference_update(lost)
            report.reasons.append(f"{', '.join(sorted(lost))}: {why}")

    if not pods:
        drop(ALL_STRATEGIES, "the job has no pods, so no TaskD manager runs")
        return report
    envs = [_env(p) for p in pods]
    ports = [_port_names(p) for p in pods]
    drop(
        {s for s, since in STRATEGY_SINCE.items() if not release_at_least(release, since)},
        f"not available in MindCluster {release}",
    )
    taskd_era = release_at_least(release, "7.3")
    if taskd_era and not all(p.get(k.PORT_TASKD[0]) == k.PORT_TASKD[1] for p in ports):
        drop(
            ALL_STRATEGIES,
            f"{release} needs container port {k.PORT_TASKD[0]}:{k.PORT_TASKD[1]} on every pod; "
            "the TaskD manager is unreachable",
        )
        return report
    if not operator_injects_env(release):
        if not all(e.get(k.ENV_PROCESS_RECOVER) == "on" for e in envs):
            drop(ALL_STRATEGIES, f"{release} needs env {k.ENV_PROCESS_RECOVER}=on set by hand on every pod")
            return report
        if not all(e.get(k.ENV_ENABLE_RESTART_FAULT_PROCESS) == "on" for e in envs):
            drop({"recover-in-place"}, f"{release} needs env {k.ENV_ENABLE_RESTART_FAULT_PROCESS}=on")
    process = ALL_STRATEGIES - {"exit"}
    if not all(k.ENV_POD_IP in e for e in envs):
        drop(process, f"env {k.ENV_POD_IP} is missing, so MindIO/TaskD cannot communicate")
    has_ttp = all(k.ENV_TTP_PORT in e for e in envs) and all(k.PORT_TTP_NAME in p for p in ports)
    if not has_ttp:
        if taskd_era:
            drop(
                process,
                f"env {k.ENV_TTP_PORT} or port {k.PORT_TTP_NAME} is missing: TaskD's controller.py "
                "refuses to start the MindIO controller (mindcluster.md §10.1)",
            )
            report.problems.append(
                (
                    EVENT_CONTROLLER_NOT_STARTED,
                    f"MindIO controller not started: "
                    f"{k.ENV_POD_IP} and {k.ENV_TTP_PORT} must both be set; only exit is possible",
                )
            )
        else:
            drop({"dump"}, f"dump needs env {k.ENV_TTP_PORT} and container port {k.PORT_TTP_NAME}")
    if framework == "mindspore":
        drop({"elastic-training"}, "elastic-training is PyTorch only")
    if any(k.ENV_PYTORCH_NO_NPU_MEMORY_CACHING in e for e in envs):
        drop({"retry"}, f"retry needs {k.ENV_PYTORCH_NO_NPU_MEMORY_CACHING} unset")
    if manager_py is not None and supported - {"exit"}:
        _check_manager(job, manager_py, report, drop)
    return report


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_manager(job: Mapping[str, Any], manager_py: str, report: SupportReport, drop: Any) -> None:
    config = parse_manager_config(manager_py)
    process = ALL_STRATEGIES - {"exit"}
    if config is None:
        return  # no init_taskd_manager call we can read: nothing to check
    node_nums, proc_per_node = config.get("node_nums"), config.get("proc_per_node")
    if UNKNOWN in (node_nums, proc_per_node):
        return  # computed at run time: nothing the simulator can check statically
    if not (_is_int(node_nums) and _is_int(proc_per_node)):
        message = (
            f"init_taskd_manager returned False: node_nums={node_nums!r} and proc_per_node="
            f"{proc_per_node!r} must be integers"
        )
        report.problems.append((EVENT_INIT_FAILED, message))
        drop(process, message)
        return
    context = JobContext.from_manifest(dict(job))
    expected = context.node_nums * context.proc_per_node
    if node_nums * proc_per_node != expected:
        message = (
            f"manager.py sizes TaskD for node_nums*proc_per_node = {node_nums}*{proc_per_node} = "
            f"{node_nums * proc_per_node} processes but the job runs {context.node_nums} pods x "
            f"{context.proc_per_node} NPUs = {expected}"
        )
        report.problems.append((EVENT_CONFIG_MISMATCH, message))
        drop(process, message)


@dataclass(frozen=True)
class AgentScript:
    """A scripted agent: what it reports and the result code of each attempt."""

    supported: frozenset[str] | None
    results: tuple[bool | int, ...] = ()
    # ReportStopComplete after stopTrain: 0, NO_REPORT (silent) or 404 ProcessNotReady (D15).
    stop_report: int = 0
    strategy_reported: bool = True  # False: silent after globalFault (no ReportRecoverStrategy)


class TaskdManagers:
    """One simulated TaskD manager per job, evaluated against the live pods and ConfigMap."""

    def __init__(self, kubeconfig_path: str) -> None:
        self.kube = Kube(kubeconfig_path)
        self._lock = threading.Lock()
        self._announced: set[str] = set()  # job uids whose start-up problems were reported
        self._scripts: dict[str, AgentScript] = {}  # job uid → scripted agent answers

    def close(self) -> None:
        self.kube.close()

    def manager_source(self, job: Mapping[str, Any]) -> str | None:
        meta = job["metadata"]
        cm = self.kube.get_configmap(
            meta.get("namespace", "default"), f"{k.TASKD_MANAGER_CONFIGMAP_PREFIX}{meta['name']}"
        )
        if cm is None:
            return None
        return (cm.get("data") or {}).get("manager.py")

    def report(self, job: Mapping[str, Any]) -> SupportReport:
        """Evaluate the job's TaskD against its live pods and manager ConfigMap."""
        meta = job["metadata"]
        pods = self.kube.list_job_pods(meta.get("namespace", "default"), meta["name"])
        return evaluate_support(job, pods, self.manager_source(job))

    def supported_strategies(self, job: Mapping[str, Any]) -> tuple[set[str], list[str]]:
        """The strategies (product names) the job's agent can run, and why anything is missing."""
        result = self.report(job)
        return set(result.supported), list(result.reasons)

    def agent_report(self, job: Mapping[str, Any]) -> tuple[set[str], list[str]]:
        """What ``ReportRecoverStrategy`` carries, in the agent's words (retry/recover/dump/downgrade)."""
        script = self.script_for(job["metadata"]["uid"])
        if script is not None and script.supported is not None:
            return set(script.supported), ["scripted agent"]
        supported, reasons = self.supported_strategies(job)
        return set(agent_words(supported)), reasons

    # --- scripted agent (MindIO is closed source) ---------------------------------------------------
    def script(
        self,
        job_uid: str,
        *,
        supported: Iterable[str] | None = None,
        results: Sequence[bool | int] | None = None,
        stop_report: int = 0,
        strategy_reported: bool = True,
    ) -> None:
        """Make job ``job_uid``'s agent report ``supported`` (agent words or product names) and, for
        attempt n of a fault event, ``results[n-1]`` (True / 0 success, False default failure, an int
        = that code; the last entry repeats). ``stop_report`` is its ReportStopComplete (0, NO_REPORT =
        silent, 404 = ProcessNotReady); ``strategy_reported=False`` keeps it silent after globalFault."""
        with self._lock:
            self._scripts[job_uid] = AgentScript(
                frozenset(agent_words(supported)) if supported is not None else None,
                tuple(results) if results else (),
                stop_report,
                strategy_reported,
            )

    def script_for(self, job_uid: str) -> AgentScript | None:
        with self._lock:
            return self._scripts.get(job_uid)

    def scripted_result(self, job_uid: str, strategy: str, attempt: int) -> bool | int | None:
        script = self.script_for(job_uid)
        if script is None or not script.results:
            return None
        return script.results[min(attempt, len(script.results)) - 1]

    def start_manager(self, job: dict[str, Any]) -> SupportReport | None:
        """The manager starts with the job: report its start-up problems once as Warning Events.

        Returns the report the first time for a job, None afterwards."""
        uid = job["metadata"]["uid"]
        with self._lock:
            if uid in self._announced:
                return None
            self._announced.add(uid)
        result = self.report(job)
        wants_recovery = k.ANNOTATION_RECOVER_STRATEGY in ((job["metadata"].get("annotations")) or {})
        for reason, message in result.problems if wants_recovery else []:
            self.kube.event(job, reason, message, type_="Warning", component="taskd-manager")
        return result
