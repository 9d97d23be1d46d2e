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

class SwitchFaultInfo(_message.Message):
    __slots__ = ("faultCode", "switchChipId", "switchPortId", "faultTime", "faultLevel")
    FAULTCODE_FIELD_NUMBER: _ClassVar[int]
    SWITCHCHIPID_FIELD_NUMBER: _ClassVar[int]
    SWITCHPORTID_FIELD_NUMBER: _ClassVar[int]
    FAULTTIME_FIELD_NUMBER: _ClassVar[int]
    FAULTLEVEL_FIELD_NUMBER: _ClassVar[int]
    faultCode: str
    switchChipId: str
    switchPortId: str
    faultTime: str
    faultLevel: str
    def __init__(self, faultCode: _Optional[str] = ..., switchChipId: _Optional[str] = ..., switchPortId: _Optional[str] = ..., faultTime: _Optional[str] = ..., faultLevel: _Optional[str] = ...) -> None: ...

class DeviceFaultInfo(_message.Message):
    __slots__ = ("deviceId", "deviceType", "faultCodes", "faultLevel", "faultType", "faultReason", "switchFaultInfos", "faultLevels")
    DEVICEID_FIELD_NUMBER: _ClassVar[int]
    DEVICETYPE_FIELD_NUMBER: _ClassVar[int]
    FAULTCODES_FIELD_NUMBER: _ClassVar[int]
    FAULTLEVEL_FIELD_NUMBER: _ClassVar[int]
    FAULTTYPE_FIELD_NUMBER: _ClassVar[int]
    FAULTREASON_FIELD_NUMBER: _ClassVar[int]
    SWITCHFAULTINFOS_FIELD_NUMBER: _ClassVar[int]
    FAULTLEVELS_FIELD_NUMBER: _ClassVar[int]
    deviceId: str
    deviceType: str
    faultCodes: _containers.RepeatedScalarFieldContainer[str]
    faultLevel: str
    faultType: _containers.RepeatedScalarFieldContainer[str]
    faultReason: _containers.RepeatedScalarFieldContainer[str]
    switchFaultInfos: _containers.RepeatedCompositeFieldContainer[SwitchFaultInfo]
    faultLevels: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, deviceId: _Optional[str] = ..., deviceType: _Optional[str] = ..., faultCodes: _Optional[_Iterable[str]] = ..., faultLevel: _Optional[str] = ..., faultType: _Optional[_Iterable[str]] = ..., faultReason: _Optional[_Iterable[str]] = ..., switchFaultInfos: _Optional[_Iterable[_Union[SwitchFaultInfo, _Mapping]]] = ..., faultLevels: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeFaultInfo(_message.Message):
    __slots__ = ("nodeName", "nodeIP", "nodeSN", "faultLevel", "faultDevice")
    NODENAME_FIELD_NUMBER: _ClassVar[int]
    NODEIP_FIELD_NUMBER: _ClassVar[int]
    NODESN_FIELD_NUMBER: _ClassVar[int]
    FAULTLEVEL_FIELD_NUMBER: _ClassVar[int]
    FAULTDEVICE_FIELD_NUMBER: _ClassVar[int]
    nodeName: str
    nodeIP: str
    nodeSN: str
    faultLevel: str
    faultDevice: _containers.RepeatedCompositeFieldContainer[DeviceFaultInfo]
    def __init__(self, nodeName: _Optional[str] = ..., nodeIP: _Optional[str] = ..., nodeSN: _Optional[str] = ..., faultLevel: _Optional[str] = ..., faultDevice: _Optional[_Iterable[_Union[DeviceFaultInfo, _Mapping]]] = ...) -> None: ...

class FaultMsgSignal(_message.Message):
    __slots__ = ("uuid", "jobId", "signalType", "nodeFaultInfo")
    UUID_FIELD_NUMBER: _ClassVar[int]
    JOBID_FIELD_NUMBER: _ClassVar[int]
    SIGNALTYPE_FIELD_NUMBER: _ClassVar[int]
    NODEFAULTINFO_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    jobId: str
    signalType: str
    nodeFaultInfo: _containers.RepeatedCompositeFieldContainer[NodeFaultInfo]
    def __init__(self, uuid: _Optional[str] = ..., jobId: _Optional[str] = ..., signalType: _Optional[str] = ..., nodeFaultInfo: _Optional[_Iterable[_Union[NodeFaultInfo, _Mapping]]] = ...) -> None: ...

class FaultQueryResult(_message.Message):
    __slots__ = ("code", "info", "faultSignal")
    CODE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    FAULTSIGNAL_FIELD_NUMBER: _ClassVar[int]
    code: int
    info: str
    faultSignal: FaultMsgSignal
    def __init__(self, code: _Optional[int] = ..., info: _Optional[str] = ..., faultSignal: _Optional[_Union[FaultMsgSignal, _Mapping]] = ...) -> None: ...
