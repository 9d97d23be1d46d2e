"""MindCluster's fault vocabulary: fault types on the wire, handling levels, well-known fault codes.

The one owner of these spellings: ClusterD's decision (``mindcluster.clusterd``), the product's
policy validation and platform decisions, and the simulator's fault injector all read them here.
Paths are in Ascend/mind-cluster ``component/``; ``cd-const`` is
``clusterd/pkg/common/constant/const.go``, ``dp-const`` ``ascend-device-plugin/pkg/common/constants.go``.
"""

from __future__ import annotations

from typing import Final

# --- fault types: FaultRank.faultType on ClusterD's wire (cd-const:204-209) -------------------------
FAULT_UCE: Final = "0"  # UceFaultType: on-chip memory (UCE) fault
FAULT_OTHER: Final = "1"  # NormalFaultType: anything else
FAULT_HCCL: Final = "2"  # HcclFaultType: HCCL communication fault

# --- handling levels of a chip or node fault (cd-const:217-248) -------------------------------------
NOT_HANDLE_FAULT: Final = "NotHandleFault"
SUB_HEALTH_FAULT: Final = "SubHealthFault"
RESTART_REQUEST: Final = "RestartRequest"
RESTART_BUSINESS: Final = "RestartBusiness"
FREE_RESTART_NPU: Final = "FreeRestartNPU"
RESTART_NPU: Final = "RestartNPU"
PRE_SEPARATE_NPU: Final = "PreSeparateNPU"
SEPARATE_NPU: Final = "SeparateNPU"
MANUALLY_SEPARATE_NPU: Final = "ManuallySeparateNPU"
PRE_SEPARATE_FAULT: Final = "PreSeparateFault"  # node (NodeD) levels
SEPARATE_FAULT: Final = "SeparateFault"
# Mildest first, as the device plugin ranks them (ignore < restart_request < ... < isolate).
CHIP_LEVELS: Final = (
    NOT_HANDLE_FAULT,
    SUB_HEALTH_FAULT,
    RESTART_REQUEST,
    RESTART_BUSINESS,
    FREE_RESTART_NPU,
    RESTART_NPU,
    PRE_SEPARATE_NPU,
    SEPARATE_NPU,
    MANUALLY_SEPARATE_NPU,
    PRE_SEPARATE_FAULT,
    SEPARATE_FAULT,
)
# Switch fault levels as strings (cd-const:263-272); RestartRequest and SubHealthFault are above.
SWITCH_LEVELS: Final = ("NotHandle", SUB_HEALTH_FAULT, RESTART_REQUEST, "PreSeparate", "Separate")
# Node and job health states (cd-const:84-88; NodeHealthyStatus, cd-const:326-328).
HEALTHY: Final = "Healthy"
SUB_HEALTHY: Final = "SubHealthy"
UNHEALTHY: Final = "UnHealthy"
HEALTH_STATES: Final = (HEALTHY, SUB_HEALTHY, UNHEALTHY)
# Every level a fault report may carry: chip/node levels, switch levels and health states.
REPORTED_LEVELS: Final = tuple(dict.fromkeys((*CHIP_LEVELS, *SWITCH_LEVELS, *HEALTH_STATES)))

# --- well-known fault codes (hex, upper case as ClusterD writes ErrorCodeHex) -----------------------
CODE_HBM_DOUBLE_BIT: Final = "80E01801"  # the UCE: HbmDoubleBitFaultCode (dp-const:770-773)
CODE_HCCL_RETRY: Final = "8C1F860B"  # HcclRetryFaultCode (clusterd/pkg/common/constant/constants.go:79)
CODE_LINK_DOWN: Final = "81078603"  # LinkDownFaultCode (ascend-common/devmanager/common/constants.go:109)

# --- the device plugin's fault handling policies, as reset.json's Policy writes them (dp-const:549-564)
POLICY_IGNORE: Final = "ignore"
POLICY_RESTART_REQUEST: Final = "restart_request"
POLICY_RESTART: Final = "restart"
POLICY_FREE_RESET: Final = "free_reset"
POLICY_RESET: Final = "reset"
POLICY_ISOLATE: Final = "isolate"
# The policy each handling level is written as ("" = a business-process fault: no chip policy).
POLICY_OF_LEVEL: Final = {
    "": "",
    NOT_HANDLE_FAULT: POLICY_IGNORE,
    SUB_HEALTH_FAULT: POLICY_IGNORE,
    RESTART_REQUEST: POLICY_RESTART_REQUEST,
    RESTART_BUSINESS: POLICY_RESTART,
    FREE_RESTART_NPU: POLICY_FREE_RESET,
    RESTART_NPU: POLICY_RESET,
    PRE_SEPARATE_NPU: POLICY_ISOLATE,
    SEPARATE_NPU: POLICY_ISOLATE,
    MANUALLY_SEPARATE_NPU: POLICY_ISOLATE,
    PRE_SEPARATE_FAULT: POLICY_ISOLATE,
    SEPARATE_FAULT: POLICY_ISOLATE,
}
# Reading a policy back: the chip level it most likely came from (a policy stands for several levels;
# a rank isolated without a chip error code is a node fault, SEPARATE_FAULT, which callers tell apart).
LEVEL_OF_POLICY: Final = {
    POLICY_IGNORE: NOT_HANDLE_FAULT,
    POLICY_RESTART_REQUEST: RESTART_REQUEST,
    POLICY_RESTART: RESTART_BUSINESS,
    POLICY_FREE_RESET: FREE_RESTART_NPU,
    POLICY_RESET: RESTART_NPU,
    POLICY_ISOLATE: SEPARATE_NPU,
}
