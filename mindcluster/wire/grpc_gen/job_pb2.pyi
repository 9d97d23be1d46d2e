from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ClientInfo(_message.Message):
    __slots__ = ("role", "clientId")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    role: str
    clientId: str
    def __init__(self, role: _Optional[str] = ..., clientId: _Optional[str] = ...) -> None: ...

class Status(_message.Message):
    __slots__ = ("code", "info", "clientId")
    CODE_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    CLIENTID_FIELD_NUMBER: _ClassVar[int]
    code: int
    info: str
    clientId: str
    def __init__(self, code: _Optional[int] = ..., info: _Optional[str] = ..., clientId: _Optional[str] = ...) -> None: ...

class JobSummarySignal(_message.Message):
    __slots__ = ("uuid", "jobId", "jobName", "namespace", "frameWork", "jobStatus", "time", "cmIndex", "total", "HcclJson", "deleteTime", "sharedTorIp", "masterAddr", "operator", "sid")
    UUID_FIELD_NUMBER: _ClassVar[int]
    JOBID_FIELD_NUMBER: _ClassVar[int]
    JOBNAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FRAMEWORK_FIELD_NUMBER: _ClassVar[int]
    JOBSTATUS_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    CMINDEX_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    HCCLJSON_FIELD_NUMBER: _ClassVar[int]
    DELETETIME_FIELD_NUMBER: _ClassVar[int]
    SHAREDTORIP_FIELD_NUMBER: _ClassVar[int]
    MASTERADDR_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    SID_FIELD_NUMBER: _ClassVar[int]
    uuid: str
    jobId: str
    jobName: str
    namespace: str
    frameWork: str
    jobStatus: str
    time: str
    cmIndex: str
    total: str
    HcclJson: str
    deleteTime: str
    sharedTorIp: str
    masterAddr: str
    operator: str
    sid: str
    def __init__(self, uuid: _Optional[str] = ..., jobId: _Optional[str] = ..., jobName: _Optional[str] = ..., namespace: _Optional[str] = ..., frameWork: _Optional[str] = ..., jobStatus: _Optional[str] = ..., time: _Optional[str] = ..., cmIndex: _Optional[str] = ..., total: _Optional[str] = ..., HcclJson: _Optional[str] = ..., deleteTime: _Optional[str] = ..., sharedTorIp: _Optional[str] = ..., masterAddr: _Optional[str] = ..., operator: _Optional[str] = ..., sid: _Optional[str] = ...) -> None: ...

class JobSummarySignalList(_message.Message):
    __slots__ = ("jobSummarySignals", "ReportTime", "JobTotalNum")
    JOBSUMMARYSIGNALS_FIELD_NUMBER: _ClassVar[int]
    REPORTTIME_FIELD_NUMBER: _ClassVar[int]
    JOBTOTALNUM_FIELD_NUMBER: _ClassVar[int]
    jobSummarySignals: _containers.RepeatedCompositeFieldContainer[JobSummarySignal]
    ReportTime: str
    JobTotalNum: int
    def __init__(self, jobSummarySignals: _Optional[_Iterable[_Union[JobSummarySignal, _Mapping]]] = ..., ReportTime: _Optional[str] = ..., JobTotalNum: _Optional[int] = ...) -> None: ...
