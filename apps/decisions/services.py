"""Answering ClusterD's "which strategy now?" in platform mode, in the order the real ClusterD asks.

The handshake (``component/clusterd/pkg/application/recover/fault_recover_platform_plugin.go`` and
``controller.go:664-676, 815-837, 1219-1232`` in Ascend/mind-cluster; mindcluster-source-facts.md §2):

0. Between faults ``ProcessRecoverStrategy`` holds a *standing answer* (retry/recover/dump: the
   policy's ``default_strategy``). ClusterD waits for one at every fault before it does anything and
   fails with code 508 after 300 s, so ``standing_ensure`` writes it whenever it is missing, empty
   or stale and no question is open. Rendering puts it on the AscendJob so it is there from creation.
1. ClusterD writes ``ProcessConfirmFault`` → ``decision_observe`` opens one decision for the job and
   evaluates the policy's rules; a rule that asks a person leaves it ``pending`` until ``deadline_at``.
2. ``decision_write`` writes ``ProcessResultFault`` (the rank list, never cut), the final
   ``ProcessRecoverStrategy`` (exit allowed now) and ``RankTableReady=true`` in one patch. ClusterD
   waits for the *key* ``ProcessResultFault`` to exist, then re-reads the strategy.
3. When ClusterD reports ``ProcessRecoverStatus``, the decision is completed: ``ProcessConfirmFault``
   is emptied (ClusterD refuses to ask again until it is), ``ProcessResultFault`` removed (its mere
   presence would answer the next question) and the standing answer restored — never "".
   An ``exit`` answer gets no status at all (``rules.go:202-203``, ``controller.go:1804-1807``; source
   facts D1), and ClusterD never clears the keys itself (plat:60-105, D11). What it does write next is
   the end of every exit, dump result, 508 and 509 (``rules.go:236-275``, D2): FaultRetry sets the
   label ``process-recover-enable=pause`` (``controller.go:1534-1568``; in platform mode right after
   ``restartAllProcess`` and FaultClear, with no schedule or 60 s wait, ``controller.go:1810-1813,
   1867-1870``). By then ClusterD has long read the answer, so the label turning ``pause`` completes
   the decision too, in time for the job's next fault.

All steps are idempotent, so any of them can be repeated after a crash.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.audit.actors import Actor
from apps.audit.services import audit_record
from apps.cluster import client as kube
from apps.cluster.errors import ClusterError
from apps.clusterd import client as clusterd_client
from apps.core import metrics
from apps.core.errors import ApplicationError
from apps.core.queue import enqueue
from apps.decisions.models import Decision
from apps.decisions.rules import CONFIRM_TYPE_NAMES, FaultFacts, evaluate, parse_confirm_fault, window_lengths
from apps.events.models import JobEvent
from apps.events.services import event_record
from apps.jobs.clusters import cluster_ref
from apps.jobs.models import TrainingJob
from apps.policies.rendering.keys import STANDING_ANSWERS, standing_answer
from apps.policies.spec import PLATFORM_STRATEGIES, PolicySpec
from mindcluster import faults as vocab
from mindcluster import keys as c

log = logging.getLogger(__name__)
State = Decision.State
OPEN_STATES = (State.PENDING, State.DECIDED, State.WRITTEN)


class DecisionError(ApplicationError):
    """The question is closed: already answered, or past its deadline (409)."""


class DecisionChoiceError(ApplicationError):
    """The answer is not one ClusterD could use for this question (400, with the allowed ones)."""

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message)
        self.allowed = allowed


def _spec(job: TrainingJob) -> PolicySpec | None:
    """The job's current spec as validated when it was stored: ClusterD is waiting, so no re-validation."""
    if job.current_revision is None:
        return None
    try:
        return PolicySpec.from_stored(job.current_revision.spec)
    except (TypeError, KeyError, ValueError, AttributeError):
        return None  # a stored shape this version cannot read: decide as if the job had no policy


# The fault type (spec.FAULT_TYPES) of well-known fault codes (mindcluster.md §6.3).
_CODE_TYPES = {vocab.CODE_HBM_DOUBLE_BIT: "uce", vocab.CODE_HCCL_RETRY: "hccl", vocab.CODE_LINK_DOWN: "hccl"}
# ClusterD answers at most 10 fault queries a second (beyond, a query waits up to 5 s, then is refused
# with an error: advance_limiter.go:33-60, grpc_service.go:188-194; mindcluster.md §6.2): at 10 faults a
# second a question's detail query could be refused, and the fault then decided as "normal" (a node
# fault recovered instead of dumped). A refused query is asked again, for well under ClusterD's 300 s
# wait for the platform's answer.
DETAIL_RETRY_S = 0.1
DETAIL_RETRY_FOR_S = 1.5


def _device_facts(device_id: str, codes: list[str], level: str, fault_type: str) -> tuple[set[str], set[str]]:
    """Our rule vocabulary for one reported device fault: a node fault is ``deviceId`` ``"-1"``
    (``DeviceFaultInfo``, mindcluster.md §6.2); a known code names its type; else ClusterD's type."""
    types: set[str] = set()
    for code in codes:
        if code.upper() in _CODE_TYPES:
            types.add(_CODE_TYPES[code.upper()])
    if device_id == "-1":
        types.add("node")
    elif not types and fault_type:
        types.add(fault_type)
    return types, {level} if level else set()


def _clusterd_facts(job: TrainingJob) -> tuple[set[str], set[str]]:
    """Fault types and levels of the job's current faults, asked of ClusterD (``GetFaultMsgSignal``).

    The question only says "on-chip memory or not", and ``reset.json`` carries no more: ClusterD
    writes each rank as Status ``fault`` with no error code and no policy (``setNewTaskInfo``,
    ``component/clusterd/pkg/domain/common/utils.go:231-269``; source facts D12). Codes and levels are
    only in ClusterD's ``fault.Fault`` service (``DeviceFaultInfo{deviceId, faultCodes, faultLevel,
    faultType}``), the source the ingester follows as a stream; one query here covers a question that
    comes before the ingester has stored the fault (or with no ingester running).
    """
    address = job.cluster.clusterd_address
    if not address:
        return set(), set()
    signal = _fault_signal(job, address)
    if signal is None:
        return set(), set()
    types: set[str] = set()
    levels: set[str] = set()
    if signal.signal_type == "normal":
        return types, levels
    for node in signal.nodes:
        for device in node.devices:
            found_types, found_levels = _device_facts(
                device.device_id,
                list(device.codes),
                device.level or node.level,
                device.fault_types[0] if device.fault_types else "",
            )
            types |= found_types
            levels |= found_levels
    return types, levels


def _fault_signal(job: TrainingJob, address: str) -> clusterd_client.FaultSignal | None:
    """ClusterD's faults of ``job``, asked again while it refuses for its rate limit; None if not had."""
    try:
        return clusterd_client.get_faults_retrying(
            address, job_id=job.uid, retry_every=DETAIL_RETRY_S, give_up_after=DETAIL_RETRY_FOR_S
        )
    except clusterd_client.ClusterDError as exc:
        log.info("job %s: no fault detail from ClusterD: %s", job.name, exc.message)
        return None


def _needs_detail(spec: PolicySpec) -> bool:
    """Do the rules tell faults apart beyond the question's own "on-chip memory or not"?"""
    for rule in spec.decision_rules:
        if "fault_level" in rule.match:
            return True
        wanted = rule.match.get("fault_type")
        if wanted is not None and set([wanted] if isinstance(wanted, str) else wanted) - {"uce"}:
            return True
    return False


def _facts(job: TrainingJob, faults: list[dict[str, Any]], spec: PolicySpec) -> FaultFacts:
    """Fault types from the question, enriched with ClusterD's fault service and what the ingester saw."""
    ranks = tuple(int(f["rank"]) for f in faults)
    types = {CONFIRM_TYPE_NAMES.get(str(f["type"]), "normal") for f in faults}
    levels: set[str] = set()
    extra_types: set[str] = set()
    extra_levels: set[str] = set()
    if _needs_detail(spec):
        extra_types, extra_levels = _clusterd_facts(job)
    if extra_types:
        # More precise than the question's 0/1: "1" only means "not only on-chip memory".
        types = (types - {"normal"}) | extra_types if "normal" in types else types | extra_types
    levels |= extra_levels
    recent = JobEvent.objects.filter(
        job=job, kind="fault.detected", occurred_at__gte=timezone.now() - timedelta(seconds=120)
    ).order_by("-seq")[:20]
    for event in recent:
        data = event.data or {}
        if data.get("fault_type"):
            types.add(str(data["fault_type"]))
        if data.get("level"):
            levels.add(str(data["level"]))
    repeats: dict[int, int] = {}
    for window in window_lengths(spec):
        since = timezone.now() - timedelta(seconds=window)
        repeats[window] = Decision.objects.filter(job=job, created_at__gte=since).count() + 1
    return FaultFacts(
        ranks=ranks, fault_types=frozenset(types), fault_levels=frozenset(levels), repeats_in_window=repeats
    )


def standing_for(job: TrainingJob, podgroup: dict[str, Any] | None = None) -> str:
    """The standing answer for a job: its policy's, else the first the PodGroup's strategies allow.

    A PodGroup keeps platform mode for the job's whole life even if the policy later drops it (ClusterD
    snapshots it at ``Init``), so a job without a platform-mode policy still gets a valid answer.
    """
    spec = _spec(job)
    if spec is not None and spec.platform_mode:
        return standing_answer(spec)
    annotations = ((podgroup or {}).get("metadata") or {}).get("annotations") or {}
    configured = str(annotations.get(c.ANNOTATION_RECOVER_STRATEGY, "")).split(",")
    return next((s for s in STANDING_ANSWERS if s in configured), "recover")


def is_standing(value: str | None) -> bool:
    """What ClusterD accepts before it asks: trimmed of spaces then commas (plugin.go:30-39)."""
    return value is not None and value.strip().strip(",") in STANDING_ANSWERS


def standing_ensure(*, job: TrainingJob, podgroup: dict[str, Any]) -> bool:
    """Write the standing answer when no question is open and it is missing, empty or stale.

    A ``ProcessResultFault`` left without a question is removed at the same time.

    Preconditioned on the PodGroup's resourceVersion: if anything changed since this copy was read
    (ClusterD may be writing a question right now), a newer watch event decides instead.
    """
    meta = podgroup.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if annotations.get(c.ANNOTATION_CONFIRM_FAULT):
        return False
    wanted = standing_for(job, podgroup)
    leftover_result = c.ANNOTATION_RESULT_FAULT in annotations  # would answer the next question unasked
    if annotations.get(c.ANNOTATION_PLATFORM_STRATEGY) == wanted and not leftover_result:
        return False
    if Decision.objects.filter(job=job, state__in=OPEN_STATES).exists():
        return False
    changes: dict[str, str | None] = {c.ANNOTATION_PLATFORM_STRATEGY: wanted}
    if leftover_result:
        changes[c.ANNOTATION_RESULT_FAULT] = None
    patch: dict[str, Any] = {"annotations": changes}
    if meta.get("resourceVersion"):
        patch["resourceVersion"] = meta["resourceVersion"]
    try:
        name = str(meta.get("name", ""))
        kube.patch_podgroup(cluster_ref(job.cluster), job.namespace, name, {"metadata": patch})
    except ClusterError as exc:
        if not exc.conflict:
            log.warning("could not write the standing answer of %s: %s", meta.get("name"), exc.message)
        return False
    return True


def decision_observe(*, job: TrainingJob, podgroup: dict[str, Any]) -> Decision | None:
    """React to a PodGroup's platform-mode keys; returns the decision touched, if any."""
    meta = podgroup.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if c.ANNOTATION_PLATFORM_STRATEGY not in annotations:
        return None  # platform mode is off for this job (its presence at creation turns it on)
    status = annotations.get(c.ANNOTATION_RECOVER_STATUS, "")
    confirm = annotations.get(c.ANNOTATION_CONFIRM_FAULT, "")
    open_decision = Decision.objects.filter(job=job, state__in=OPEN_STATES).first()
    if open_decision is not None and open_decision.state == State.WRITTEN and status:
        return decision_complete(decision=open_decision, outcome=status, podgroup=podgroup)
    if (
        open_decision is not None
        and open_decision.state == State.WRITTEN
        and fault_retry_began(open_decision, podgroup)
    ):
        return decision_complete(decision=open_decision, outcome=FAULT_RETRY, podgroup=podgroup)
    if open_decision is not None:
        return open_decision
    if not confirm:
        standing_ensure(job=job, podgroup=podgroup)
        return None
    if c.ANNOTATION_RESULT_FAULT in annotations:
        # A copy from before the last question was cleared (ClusterD patched the PodGroup after its
        # status, and the watch delivers that copy after the clearing): a new question always comes
        # without a result, since completing a decision removes it. Answering this stale copy would
        # hand ClusterD a ready-made result for its next, different fault.
        return None
    return decision_open(
        job=job,
        podgroup_name=str(meta.get("name", "")),
        confirm_fault=confirm,
        rank_table=c.ANNOTATION_RANK_TABLE_READY in annotations,
        standing=str(annotations.get(c.ANNOTATION_PLATFORM_STRATEGY, "")).strip().strip(","),
        recover_label=recover_label(podgroup),
    )


# The outcome recorded when FaultRetry, not a status, ended the decision (fits Decision.outcome).
FAULT_RETRY = "fault-retry: label pause"


def recover_label(podgroup: dict[str, Any]) -> str:
    """The PodGroup's ``process-recover-enable`` label ("" when absent)."""
    labels = (podgroup.get("metadata") or {}).get("labels") or {}
    return str(labels.get(c.LABEL_PROCESS_RECOVER_ENABLE, ""))


def fault_retry_began(decision: Decision, podgroup: dict[str, Any]) -> bool:
    """Has ClusterD entered FaultRetry since it asked this question (label ``pause``)?

    FaultRetry (``controller.go:1534-1568``) is the last state of every path that starts from an exit
    answer, a dump result or a 508/509 (``rules.go:236-275``), and it comes after ClusterD read the
    answer. A label already at ``pause`` when the question was asked (a killMaster leaves it there,
    ``rules.go:264-271``) says nothing about this decision.
    """
    if recover_label(podgroup) != c.PROCESS_RECOVER_PAUSE:
        return False
    context = decision.context if isinstance(decision.context, dict) else {}
    return context.get("recover_label") != c.PROCESS_RECOVER_PAUSE


def decision_open(
    *,
    job: TrainingJob,
    podgroup_name: str,
    confirm_fault: str,
    rank_table: bool = False,
    standing: str | None = None,
    recover_label: str | None = None,
) -> Decision | None:
    """Store the question with its verdict, answer at once when a rule decided, then record it.

    The answer goes out before the events and the audit entry are written: ClusterD is blocked
    until it lands, and the stored row (written first) already says what was decided and why.
    """
    spec = _spec(job)
    faults = parse_confirm_fault(confirm_fault)
    now = timezone.now()
    if spec is None or not spec.platform_mode:
        strategy, decided_by, reason = "exit", "default", "the job's policy has no platform mode"
        timeout = 0
    else:
        facts = _facts(job, faults, spec)
        verdict = evaluate(spec, facts)
        strategy, decided_by, reason = verdict.strategy, verdict.decided_by, verdict.reason
        timeout = spec.decision_timeout_s
    ask = strategy == "ask"
    try:
        decision = Decision.objects.create(
            job=job,
            podgroup=podgroup_name,
            confirm_fault=confirm_fault,
            faults=faults,
            context={
                "fault_types": sorted({CONFIRM_TYPE_NAMES.get(str(f["type"]), "normal") for f in faults}),
                "rank_table": rank_table,
                **({"standing": standing} if standing is not None else {}),
                **({"recover_label": recover_label} if recover_label is not None else {}),
            },
            state=State.PENDING if ask else State.DECIDED,
            strategy="" if ask else strategy,
            decided_by="" if ask else decided_by,
            reason=reason[:500],
            deadline_at=now + timedelta(seconds=timeout) if ask else None,
            decided_at=None if ask else now,
        )
    except IntegrityError:
        # ``decide`` is the one observer of questions, but during a rolling restart (or with two
        # processes started for one shard) two copies may see the same question: one row wins.
        return Decision.objects.filter(job=job, state__in=OPEN_STATES).first()
    _after_decided(decision)
    with transaction.atomic():
        _record(
            decision,
            "decision.requested",
            f"ClusterD asks which strategy to use for ranks {_ranks(faults)}: {reason}",
        )
        if not ask:
            _record(decision, "decision.answered", f"{decided_by} chose {strategy}: {reason}")
        audit_record(
            actor=Actor.system(f"decision:{decided_by or 'pending'}"),
            action="decision.open",
            obj=decision,
            after={"strategy": strategy, "reason": reason, "confirm_fault": confirm_fault},
        )
    return decision


def _after_decided(decision: Decision) -> None:
    if decision.state == State.DECIDED:
        # ClusterD is blocked until the answer lands: write it here and now; the Celery task is the
        # retry path for anything transient (and the sweep the path after a crash).
        try:
            decision_write(decision_id=decision.pk)
        except ClusterError as exc:
            log.info("decision %s: inline write failed (%s); queued for retry", decision.pk, exc.message)
            enqueue("decisions.write", kwargs={"decision_id": decision.pk}, queue=settings.CELERY_PUSH_QUEUE)
    else:
        assert decision.deadline_at is not None
        delay = max(0.0, (decision.deadline_at - timezone.now()).total_seconds())
        expire = {"decision_id": decision.pk}
        enqueue("decisions.expire", kwargs=expire, countdown=delay, queue=settings.CELERY_PUSH_QUEUE)
        from apps.decisions.notify import notify_pending

        notify_pending(decision)


def _ranks(faults: list[dict[str, Any]]) -> str:
    return ",".join(str(f["rank"]) for f in faults) or "?"


def _record(decision: Decision, kind: str, message: str) -> None:
    event_record(
        job=decision.job,
        kind=kind,
        message=message,
        source="decision",
        data={
            "decision": decision.pk,
            "strategy": decision.strategy,
            "decided_by": decision.decided_by,
            "faults": decision.faults,
            "deadline_at": decision.deadline_at.isoformat() if decision.deadline_at else None,
        },
        dedupe_key=f"{kind}:{decision.pk}",
    )


def _configured(decision: Decision) -> set[str]:
    spec = _spec(decision.job)
    return set(spec.strategies) if spec else set()


def allowed_answers(decision: Decision) -> list[str]:
    """Strategies a person may choose: ClusterD's accepted values that the policy configures.

    ``retry`` only where ClusterD can still use it. It sorted the faults before it asked: they stay on
    the retry path only when the standing answer it found was retry (``supportRetryStrategy``,
    ``controller.go:364-370``, via ``takeRetryFault2NormalFault`` at :1006) and every fault is
    retry-type, UCE "0" or HCCL "2"; otherwise ``firstChooseStrategy`` (:1096-1101) never picks retry
    and the answer would end in exit.
    """
    configured = _configured(decision)
    allowed: list[str] = [s for s in PLATFORM_STRATEGIES if s in configured or s == "exit"]
    standing = decision.context.get("standing") if isinstance(decision.context, dict) else None
    if standing is not None:  # known for every question observed on a PodGroup
        retry_path = standing == "retry" and all(str(f.get("type")) in ("0", "2") for f in decision.faults)
        if not retry_path:
            allowed = [s for s in allowed if s != "retry"]
    return allowed


def decision_answer(
    *, decision_id: int, strategy: str, user: User, token_name: str = "", request_id: str = ""
) -> Decision:
    """A person answers a pending question before its deadline; a late answer is refused (409).

    Past the deadline the policy's default is what ClusterD gets: it is written at once here (if the
    expiry task has not done it yet), and the person is told which strategy went out instead.
    """
    late = False
    with transaction.atomic():
        decision = Decision.objects.select_for_update().select_related("job").get(pk=decision_id)
        if decision.state != State.PENDING:
            raise DecisionError(f"this decision is already {decision.state} ({decision.decided_by})")
        late = decision.deadline_at is not None and decision.deadline_at <= timezone.now()
        if not late:
            _answer_pending(decision, strategy, user, token_name=token_name, request_id=request_id)
            return decision
    expired = decision_expire(decision_id=decision_id) or decision
    deadline = expired.deadline_at.isoformat() if expired.deadline_at else "?"
    raise DecisionError(
        f"too late: the deadline passed at {deadline}, so the default strategy "
        f"{expired.strategy or '?'} was answered instead"
    )


def _answer_pending(
    decision: Decision, strategy: str, user: User, *, token_name: str, request_id: str
) -> None:
    """Record a person's answer (inside the caller's transaction); the write follows on commit."""
    allowed = allowed_answers(decision)
    if strategy not in allowed:
        why = (
            " (ClusterD put these faults off its retry path before it asked: retry would end in exit)"
            if strategy == "retry" and "retry" in _configured(decision)
            else ""
        )
        raise DecisionChoiceError(
            f"{strategy!r} is not allowed here{why}; choose one of: {', '.join(allowed)}", allowed
        )
    decision.state = State.DECIDED
    decision.strategy = strategy
    decision.decided_by = f"user:{user.get_username()}"
    decision.answered_by = user
    decision.reason = f"answered by {user.get_username()}"
    decision.decided_at = timezone.now()
    decision.save()
    _record(decision, "decision.answered", f"{user.get_username()} chose {strategy}")
    audit_record(
        actor=Actor(user=user, token_name=token_name, request_id=request_id),
        action="decision.answer",
        obj=decision,
        before={"state": "pending"},
        after={"strategy": strategy},
    )
    transaction.on_commit(lambda: _after_decided(decision))


def decision_expire(*, decision_id: int) -> Decision | None:
    """At the deadline, a question nobody answered gets the policy's default strategy."""
    with transaction.atomic():
        decision = Decision.objects.select_for_update().select_related("job").filter(pk=decision_id).first()
        if decision is None or decision.state != State.PENDING:
            return decision
        if decision.deadline_at and decision.deadline_at > timezone.now():
            return decision  # woke early (clock skew); the sweep catches it later
        spec = _spec(decision.job)
        decision.state = State.DECIDED
        decision.strategy = spec.default_strategy if spec else "exit"
        decision.decided_by = "default:deadline"
        decision.reason = (
            f"nobody answered within {spec.decision_timeout_s if spec else 0}s: default strategy"
        )
        decision.decided_at = timezone.now()
        decision.save()
        _record(decision, "decision.answered", f"deadline passed: default strategy {decision.strategy}")
        audit_record(
            actor=Actor.system("decision:deadline"),
            action="decision.expire",
            obj=decision,
            after={"strategy": decision.strategy},
        )
        transaction.on_commit(lambda: _after_decided(decision))
    return decision


def decision_write(*, decision_id: int) -> Decision | None:
    """Write the answer to the PodGroup; safe to repeat.

    One merge patch of only the platform's keys, without a read first, so ClusterD (polling every
    3 s) sees the result, the strategy and the RankTable together:

    - ``ProcessResultFault``: the confirmed ranks, whole (ClusterD waits for this key to exist);
    - ``ProcessRecoverStrategy``: the final answer, which ClusterD re-reads once the result exists;
    - ``RankTableReady=true`` always: ClusterD checks it before a recover and fails on any other value
      (``fault_recover_platform_plugin.go:141-159``);
    - ``ProcessRecoverStatus`` emptied: a status left from the previous fault must not be taken for
      the outcome of this answer (ClusterD only writes it, after reading the answer).
    """
    decision = Decision.objects.select_related("job__cluster").filter(pk=decision_id).first()
    if decision is None or decision.state != State.DECIDED:
        return decision
    job = decision.job
    annotations = {
        c.ANNOTATION_RESULT_FAULT: decision.confirm_fault,
        c.ANNOTATION_PLATFORM_STRATEGY: decision.strategy,
        c.ANNOTATION_RANK_TABLE_READY: "true",
        c.ANNOTATION_RECOVER_STATUS: "",
    }
    try:
        kube.patch_podgroup(
            cluster_ref(job.cluster),
            job.namespace,
            decision.podgroup,
            {"metadata": {"annotations": annotations}},
        )
    except ClusterError as exc:
        Decision.objects.filter(pk=decision.pk).update(last_error=exc.message[:500])
        if exc.permanent:
            Decision.objects.filter(pk=decision.pk).update(state=State.FAILED)
            return Decision.objects.get(pk=decision.pk)
        raise
    written_at = timezone.now()
    written = Decision.objects.filter(pk=decision.pk, state=State.DECIDED)
    if written.update(state=State.WRITTEN, written_at=written_at):
        who = metrics.decider_kind(decision.decided_by)
        metrics.DECISIONS.labels(decided_by=who).inc()
        # From the question seen (the row is created then) to the answer in the PodGroup.
        seconds = max(0.0, (written_at - decision.created_at).total_seconds())
        metrics.DECISION_SECONDS.labels(decided_by=who).observe(seconds)
    decision.refresh_from_db()
    return decision


def decision_complete(
    *, decision: Decision, outcome: str, podgroup: dict[str, Any] | None = None
) -> Decision:
    """ClusterD reported the outcome: record it, clear the question and restore the standing answer.

    ``ProcessConfirmFault`` is emptied (ClusterD refuses to ask while it holds anything),
    ``ProcessResultFault`` removed (ClusterD waits for the key to *exist*, so a leftover "" would
    answer the next question unasked) and ``ProcessRecoverStrategy`` set back to the standing answer:
    never "" — ClusterD would wait 300 s at the next fault and give up with code 508.
    """
    job = decision.job
    ref = cluster_ref(job.cluster)
    standing = standing_for(job, podgroup)
    for _ in range(settings.PUSH_MAX_CONFLICTS):
        try:
            live = kube.get_podgroup(ref, job.namespace, decision.podgroup)
            kube.patch_podgroup(
                ref,
                job.namespace,
                decision.podgroup,
                {
                    "metadata": {
                        "annotations": {
                            c.ANNOTATION_CONFIRM_FAULT: "",
                            c.ANNOTATION_RESULT_FAULT: None,
                            c.ANNOTATION_PLATFORM_STRATEGY: standing,
                            c.ANNOTATION_RECOVER_STATUS: "",
                        },
                        "resourceVersion": live["metadata"]["resourceVersion"],
                    }
                },
            )
            break
        except ClusterError as exc:
            if not exc.conflict:
                log.warning("could not clear platform keys of %s: %s", decision.podgroup, exc.message)
                break
    with transaction.atomic():  # state and its event become visible together
        Decision.objects.filter(pk=decision.pk).update(
            state=State.COMPLETED, outcome=outcome[:32], completed_at=timezone.now()
        )
        decision.refresh_from_db()
        event_record(
            job=job,
            kind="decision.completed",
            source="decision",
            message=(
                f"ClusterD entered fault-retry (label {c.LABEL_PROCESS_RECOVER_ENABLE}=pause) after the "
                f"{decision.strategy} decision: question cleared, standing answer restored"
                if outcome == FAULT_RETRY
                else f"ClusterD reported {outcome} for the {decision.strategy} decision"
                if outcome != NO_STATUS
                else f"ClusterD reported no outcome for the {decision.strategy} decision within "
                f"{ABANDONED_AFTER_S // 60} min: question cleared, standing answer restored"
            ),
            data={"decision": decision.pk, "outcome": outcome},
            dedupe_key=f"decision.completed:{decision.pk}",
        )
    return decision


# ClusterD waits at most 300 s per step (const.go:161) and reports ProcessRecoverStatus as an attempt
# ends; an answer with no status long after that was never used (ClusterD had given up with 508/509,
# or the job is gone). Its question must still be cleared, or ClusterD refuses every later one (509).
ABANDONED_AFTER_S = 900
NO_STATUS = "none: ClusterD reported nothing"


def decisions_sweep() -> int:
    """Safety net after restarts: expire overdue questions, (re)write decided answers, and clear
    answers ClusterD never reported on (restoring the standing answer)."""
    count = 0
    for pk in Decision.objects.filter(state=State.PENDING, deadline_at__lte=timezone.now()).values_list(
        "pk", flat=True
    ):
        decision_expire(decision_id=pk)
        count += 1
    stale = timezone.now() - timedelta(seconds=2)
    for pk in Decision.objects.filter(state=State.DECIDED, decided_at__lte=stale).values_list(
        "pk", flat=True
    ):
        enqueue("decisions.write", kwargs={"decision_id": pk}, queue=settings.CELERY_PUSH_QUEUE)
        count += 1
    abandoned = timezone.now() - timedelta(seconds=ABANDONED_AFTER_S)
    for decision in Decision.objects.filter(state=State.WRITTEN, written_at__lte=abandoned).select_related(
        "job__cluster"
    ):
        decision_complete(decision=decision, outcome=NO_STATUS)
        count += 1
    # Current state for /metrics, refreshed by the sweep (a scrape never queries the database).
    metrics.PENDING_DECISIONS.set(Decision.objects.filter(state=State.PENDING).count())
    return count
