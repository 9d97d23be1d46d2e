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

import json
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
