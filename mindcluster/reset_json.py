"""The ``reset.json`` format: ConfigMap ``reset-config-<job>``, where a job's faulty ranks are written.

Pure: builds and reads the document; reading and writing the ConfigMap stays with the caller.
Paths are in Ascend/mind-cluster ``component/``; ``cd-const`` is
``clusterd/pkg/common/constant/const.go``. The document is Go's ``TaskResetInfo`` marshalled without
json tags (``clusterd/pkg/domain/common/type.go:16-39``): ``RankList`` of ``{RankId, LogicId, Status,
Policy, InitialPolicy, ErrorCode, ErrorCodeHex}``, ``UpdateTime``, ``RetryTime``, ``FaultFlushing``,
``GracefulExit``, ``RestartFaultProcess``. ClusterD writes ranks with Status ``fault`` and no policy
(``clusterd/pkg/domain/common/utils.go:231-269``); the device plugin's hot-reset path writes them
``unrecovered`` with the chip's policy and error code
(``ascend-device-plugin/pkg/common/constants.go:549-590``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from mindcluster import keys as k

CONFIGMAP_PREFIX: Final = k.RESET_CONFIGMAP_PREFIX  # ResetInfoCMNamePrefix (cd-const:97)
DATA_KEY: Final = "reset.json"  # ResetInfoCMDataKey (cd-const:99)
CHECK_CODE_KEY: Final = "checkCode"  # ResetInfoCMCheckCodeKey (cd-const:101)
# Rank Status values: ClusterD's FaultRankStatus (cd-const:110) and the device plugin's
# (ascend-device-plugin/pkg/common/constants.go:584-590).
STATUS_FAULT: Final = "fault"
STATUS_UNRECOVERED: Final = "unrecovered"
STATUS_RECOVERED: Final = "recovered"
STATUS_FAILED: Final = "failed"

# setNewTaskInfo's operations (cd-const:124-130): what each ClusterD write of reset.json does.
OP_RESTART_ALL_PROCESS: Final = "restartAllProcess"  # RetryTime + 1, RankList emptied
OP_CLEAR: Final = "clear"  # RankList emptied
OP_FAULT: Final = "fault"  # RankList = the fault ranks, RestartFaultProcess as given
OP_FAULT_FLUSHING: Final = "notifyFaultFlushing"  # FaultFlushing on, RankList emptied
OPERATIONS: Final = (OP_RESTART_ALL_PROCESS, OP_CLEAR, OP_FAULT, OP_FAULT_FLUSHING)
# Rank policies of the device plugin's hot reset (HotResetPolicy, RestartPolicy; cd-const:211-213): with
# one of them in the old document every ClusterD write fails (utils.go:233-237).
HOT_RESET_POLICIES: Final = ("reset", "restart")


class ResetWriteRefused(ValueError):
    """setNewTaskInfo refused the write: "hotReset=1 is not compatible with process-recover"."""


def clusterd_rank(rank: int) -> dict[str, Any]:
    """A ``RankList`` entry as ClusterD writes it: the rank, Status ``fault``, every other field zero
    (``TaskDevInfo{RankId, DevFaultInfo{Status: FaultRankStatus}}``, utils.go:256-263)."""
    return {
        "RankId": rank,
        "LogicId": 0,
        "Status": STATUS_FAULT,
        "Policy": "",
        "InitialPolicy": "",
        "ErrorCode": None,
        "ErrorCodeHex": "",
    }


def set_new_task_info(
    old: Mapping[str, Any],
    operation: str,
    *,
    fault_ranks: Iterable[int] = (),
    restart_fault_process: bool = False,
    now: int,
) -> dict[str, Any]:
    """The document ClusterD writes over ``old`` for ``operation`` (setNewTaskInfo, utils.go:231-269).

    Nothing of ``old`` is kept but ``RetryTime``: a fresh ``TaskResetInfo`` with an empty RankList,
    ``UpdateTime`` = ``now`` (Unix seconds), ``FaultFlushing`` only for notifyFaultFlushing,
    ``GracefulExit`` 0, ``RestartFaultProcess`` false; restartAllProcess adds 1 to RetryTime; only the
    ``fault`` operation writes ranks and ``RestartFaultProcess``. Keys are in the struct's order
    (cd/common/type.go:16-39), as Go's json.Marshal writes them. Raises ``ResetWriteRefused`` when
    ``old`` has a rank with a hot-reset policy (utils.go:233-237), ``ValueError`` for an unknown
    operation (ClusterD has no other)."""
    if operation not in OPERATIONS:
        raise ValueError(f"unknown reset.json operation {operation!r}; one of {', '.join(OPERATIONS)}")
    if any(policy(entry) in HOT_RESET_POLICIES for entry in rank_entries(dict(old))):
        raise ResetWriteRefused("hotReset=1 is not compatible with process-recover")
    retry_time = old.get("RetryTime")
    retry = retry_time if isinstance(retry_time, int) and not isinstance(retry_time, bool) else 0
    doc: dict[str, Any] = {
        "RankList": [],
        "UpdateTime": int(now),
        "RetryTime": retry + (1 if operation == OP_RESTART_ALL_PROCESS else 0),
        "FaultFlushing": operation == OP_FAULT_FLUSHING,
        "GracefulExit": 0,
        "RestartFaultProcess": False,
    }
    if operation == OP_FAULT:
        doc["RankList"] = [clusterd_rank(int(rank)) for rank in fault_ranks]
        doc["RestartFaultProcess"] = bool(restart_fault_process)
    return doc


def go_marshal(doc: Any) -> str:
    """``doc`` as Go's json.Marshal writes it: compact, UTF-8, with <, > and & escaped."""
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def check_code(doc: Any) -> str:
    """The ``checkCode`` key: sha256 (hex) of the marshalled document (MakeDataHash,
    clusterd/pkg/common/util/util.go:49-71; written by WriteResetInfoToCM, utils.go:215-227)."""
    return hashlib.sha256(go_marshal(doc).encode()).hexdigest()


def configmap_data(doc: Any) -> dict[str, str]:
    """The ConfigMap ``data`` ClusterD writes: the document and its check code (utils.go:220-227)."""
    return {DATA_KEY: go_marshal(doc), CHECK_CODE_KEY: check_code(doc)}


def configmap_name(job_name: str) -> str:
    return f"{CONFIGMAP_PREFIX}{job_name}"


def job_name_of(configmap_name: str) -> str | None:
    """The job a ``reset-config-<job>`` ConfigMap belongs to; None for any other name."""
    if configmap_name.startswith(CONFIGMAP_PREFIX) and len(configmap_name) > len(CONFIGMAP_PREFIX):
        return configmap_name[len(CONFIGMAP_PREFIX) :]
    return None


def parse(text: Any) -> dict[str, Any]:
    """The document as a dict; a missing, malformed or non-object document reads as empty (never raises)."""
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def parse_configmap_data(data: Any) -> dict[str, Any]:
    """``parse`` of the ConfigMap's ``data`` mapping (its ``reset.json`` key)."""
    return parse(data.get(DATA_KEY) if isinstance(data, dict) else None)


def rank_entries(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``RankList`` entries that are objects (anything else in the list is skipped)."""
    ranks = doc.get("RankList")
    return [entry for entry in ranks if isinstance(entry, dict)] if isinstance(ranks, list) else []


def rank_id(entry: dict[str, Any]) -> int | None:
    """``RankId`` as an int (Go writes a number; a string of digits is read too), else None."""
    value = entry.get("RankId")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value) if value is not None else ""
    return int(text) if text.isascii() and text.isdigit() else None  # "²".isdigit() is True


def error_code_hex(entry: dict[str, Any]) -> str:
    """``ErrorCodeHex`` upper-cased ("" when the rank has none)."""
    return str(entry.get("ErrorCodeHex") or "").upper()


def policy(entry: dict[str, Any]) -> str:
    """The rank's handling policy: ``Policy``, else the ``InitialPolicy`` it started with."""
    return str(entry.get("Policy") or entry.get("InitialPolicy") or "")


def rank_entry(rank: int, logic_id: int, status: str, policy: str, code_hex: str) -> dict[str, Any]:
    """One ``RankList`` entry (``TaskDevInfo``) as the device plugin writes a chip fault."""
    return {
        "RankId": rank,
        "LogicId": logic_id,
        "Status": status,
        "Policy": policy,
        "InitialPolicy": policy,
        "ErrorCode": [int(code_hex, 16)] if code_hex else None,
        "ErrorCodeHex": code_hex,
    }


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc)
