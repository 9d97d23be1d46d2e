from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Status(_message.Message):
    __slots__ = ("code", "info")
    CODE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    code: int
    info: str
    def __init__(self, code: _Optional[int] = ..., info: _Optional[str] = ...) -> None: ...

class ClientInfo(_message.Message):
    __slots__ = ("jobId", "role")
    JOBID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    jobId: str
    role: str
    def __init__(self, jobId: _Optional[str] = ..., role: _Optional[str] = ...) -> None: ...

class FaultRank(_message.Message):
    __slots__ = ("rankId", "faultType")
    RANKID_FIELD_NUMBER: _ClassVar[int]
    FAULTTYPE_FIELD_NUMBER: _ClassVar[int]
    rankId: str
    faultType: str
    def __init__(self, rankId: _Optional[str] = ..., faultType: _Optional[str] = ...) -> None: ...

class ProcessManageSignal(_message.Message):
    __slots__ = ("uuid", "jobId", "signalType", "actions", "faultRanks", "changeStrategy", "timeout", "nodeRankIds", "extraParams")
    UUID_FIELD_NUMBER: _ClassVar[int]
    JOBID_FIELD_NUMBER: _ClassVar[int]
    SIGNALTYPE_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    FAULTRANKS_FIELD_NUMBER: _ClassVar[int]
    CHANGESTRATEGY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    NODERANKIDS_FIELD_NUMBER: _ClassVar[int]
    EXTRAPARAMS_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    jobId: str
    signalType: str
    actions: _containers.RepeatedScalarFieldContainer[str]
    faultRanks: _containers.RepeatedCompositeFieldContainer[FaultRank]
    changeStrategy: str
    timeout: int
    nodeRankIds: _containers.RepeatedScalarFieldContainer[str]
    extraParams: str
    def __init__(self, uuid: _Optional[str] = ..., jobId: _Optional[str] = ..., signalType: _Optional[str] = ..., actions: _Optional[_Iterable[str]] = ..., faultRanks: _Optional[_Iterable[_Union[FaultRank, _Mapping]]] = ..., changeStrategy: _Optional[str] = ..., timeout: _Optional[int] = ..., nodeRankIds: _Optional[_Iterable[str]] = ..., extraParams: _Optional[str] = ...) -> None: ...

class StopCompleteRequest(_message.Message):
    __slots__ = ("jobId", "status", "faultRanks")
    JOBID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FAULTRANKS_FIELD_NUMBER: _ClassVar[int]
    jobId: str
    status: Status
    faultRanks: _containers.RepeatedCompositeFieldContainer[FaultRank]
    def __init__(self, jobId: _Optional[str] = ..., status: _Optional[_Union[Status, _Mapping]] = ..., faultRanks: _Optional[_Iterable[_Union[FaultRank, _Mapping]]] = ...) -> None: ...

class RecoverStrategyRequest(_message.Message):
    __slots__ = ("jobId", "faultRanks", "strategies")
    JOBID_FIELD_NUMBER: _ClassVar[int]
    FAULTRANKS_FIELD_NUMBER: _ClassVar[int]
    STRATEGIES_FIELD_NUMBER: _ClassVar[int]
    jobId: str
    faultRanks: _containers.RepeatedCompositeFieldContainer[FaultRank]
    strategies: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, jobId: _Optional[str] = ..., faultRanks: _Optional[_Iterable[_Union[FaultRank, _Mapping]]] = ..., strategies: _Optional[_Iterable[str]] = ...) -> None: ...

class RecoverStatusRequest(_message.Message):
    __slots__ = ("jobId", "status", "strategy", "isolateRankIds")
    JOBID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    ISOLATERANKIDS_FIELD_NUMBER: _ClassVar[int]
    jobId: str
    status: Status
    strategy: str
    isolateRankIds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, jobId: _Optional[str] = ..., status: _Optional[_Union[Status, _Mapping]] = ..., strategy: _Optional[str] = ..., isolateRankIds: _Optional[_Iterable[str]] = ...) -> None: ...

class ProcessFaultRequest(_message.Message):
    __slots__ = ("jobId", "faultRanks")
    JOBID_FIELD_NUMBER: _ClassVar[int]
    FAULTRANKS_FIELD_NUMBER: _ClassVar[int]
    jobId: str
    faultRanks: _containers.RepeatedCompositeFieldContainer[FaultRank]
    def __init__(self, jobId: _Optional[str] = ..., faultRanks: _Optional[_Iterable[_Union[FaultRank, _Mapping]]] = ...) -> None: ...
