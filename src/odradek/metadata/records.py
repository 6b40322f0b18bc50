"""Kafka's metadata record types (the contents of `__cluster_metadata`).

A record value is what Kafka's MetadataRecordSerde writes: frame version (uvarint, 1),
api key (uvarint), record version (uvarint), then the record in the flexible encoding
(compact strings and arrays, tagged fields). Record keys are null.

Each record type is a dataclass with a `FIELDS` table (attribute, kind, first version, tag);
one generic codec reads and writes them all.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from odradek.metadata._codec import Reader, Writer
from odradek.protocol.errors import ProtocolError

__all__ = [
    "RECORD_TYPES",
    "AccessControlEntryRecord",
    "BrokerEndpoint",
    "BrokerFeature",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "Field",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "QuotaEntityData",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
    "decode_record",
    "encode_record",
]

FRAME_VERSION = 1
ZERO_UUID = uuid.UUID(int=0)

# ConfigRecord.resource_type values (Kafka's ConfigResource.Type ids)
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32


@dataclass(frozen=True, slots=True)
class Field:
    attr: str
    kind: Any  # a kind name (see _READERS) or a struct class for an array of structs
    versions: int = 0  # first version carrying the field
    tag: int | None = None  # tagged fields are written only when not equal to their default
    default: Any = None


class _Struct:
    FIELDS: ClassVar[tuple[Field, ...]] = ()


@dataclass(slots=True)
class BrokerEndpoint(_Struct):
    name: str = ""
    host: str = ""
    port: int = 0
    security_protocol: int = 0

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", "string"),
        Field("host", "string"),
        Field("port", "uint16"),
        Field("security_protocol", "int16"),
    )


@dataclass(slots=True)
class BrokerFeature(_Struct):
    name: str = ""
    min_supported_version: int = 0
    max_supported_version: int = 0

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", "string"),
        Field("min_supported_version", "int16"),
        Field("max_supported_version", "int16"),
    )


class MetadataRecord(_Struct):
    API_KEY: ClassVar[int]
    VERSION: ClassVar[int] = 0  # the version we write
    MAX_VERSION: ClassVar[int] = 0  # the highest version we read


@dataclass(slots=True)
class RegisterBrokerRecord(MetadataRecord):
    broker_id: int = 0
    is_migrating_zk_broker: bool = False
    incarnation_id: uuid.UUID = ZERO_UUID
    broker_epoch: int = 0
    end_points: list[BrokerEndpoint] = field(default_factory=list)
    features: list[BrokerFeature] = field(default_factory=list)
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)

    API_KEY: ClassVar[int] = 0
    VERSION: ClassVar[int] = 3
    MAX_VERSION: ClassVar[int] = 3
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("broker_id", "int32"),
        Field("is_migrating_zk_broker", "bool", versions=2),
        Field("incarnation_id", "uuid"),
        Field("broker_epoch", "int64"),
        Field("end_points", BrokerEndpoint),
        Field("features", BrokerFeature),
        Field("rack", "nstring"),
        Field("fenced", "bool"),
        Field("in_controlled_shutdown", "bool", versions=1),
        Field("log_dirs", "uuids", versions=3, tag=0, default=[]),
    )


@dataclass(slots=True)
class UnregisterBrokerRecord(MetadataRecord):
    broker_id: int = 0
    broker_epoch: int = 0

    API_KEY: ClassVar[int] = 1
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("broker_id", "int32"), Field("broker_epoch", "int64"))


@dataclass(slots=True)
class TopicRecord(MetadataRecord):
    name: str = ""
    topic_id: uuid.UUID = ZERO_UUID

    API_KEY: ClassVar[int] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", "string"), Field("topic_id", "uuid"))


@dataclass(slots=True)
class PartitionRecord(MetadataRecord):
    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader: int = -1
    leader_recovery_state: int = 0
    leader_epoch: int = -1
    partition_epoch: int = -1
    directories: list[uuid.UUID] = field(default_factory=list)

    API_KEY: ClassVar[int] = 3
    # v1 (KIP-858): the log directory of each replica, in replica order (UNASSIGNED_DIR
    # where the broker has not said yet)
    VERSION: ClassVar[int] = 1
    MAX_VERSION: ClassVar[int] = 1
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_id", "int32"),
        Field("topic_id", "uuid"),
        Field("replicas", "int32s"),
        Field("isr", "int32s"),
        Field("removing_replicas", "int32s"),
        Field("adding_replicas", "int32s"),
        Field("leader", "int32"),
        Field("leader_recovery_state", "int8", tag=0, default=0),
        Field("leader_epoch", "int32"),
        Field("partition_epoch", "int32"),
        Field("directories", "uuids", versions=1),
    )


@dataclass(slots=True)
class ConfigRecord(MetadataRecord):
    resource_type: int = 0
    resource_name: str = ""
    name: str = ""
    value: str | None = None  # None removes the config

    API_KEY: ClassVar[int] = 4
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("resource_type", "int8"),
        Field("resource_name", "string"),
        Field("name", "string"),
        Field("value", "nstring"),
    )


@dataclass(slots=True)
class PartitionChangeRecord(MetadataRecord):
    """Only the fields that changed: None / -2 / -1 mean 'unchanged'."""

    partition_id: int = -1
    topic_id: uuid.UUID = ZERO_UUID
    isr: list[int] | None = None
    leader: int = -2  # -2 unchanged, -1 no leader
    replicas: list[int] | None = None
    removing_replicas: list[int] | None = None
    adding_replicas: list[int] | None = None
    leader_recovery_state: int = -1
    directories: list[uuid.UUID] | None = None  # v1 (KIP-858): None unchanged

    API_KEY: ClassVar[int] = 5
    VERSION: ClassVar[int] = 1
    MAX_VERSION: ClassVar[int] = 1
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("partition_id", "int32"),
        Field("topic_id", "uuid"),
        Field("isr", "nint32s", tag=0, default=None),
        Field("leader", "int32", tag=1, default=-2),
        Field("replicas", "nint32s", tag=2, default=None),
        Field("removing_replicas", "nint32s", tag=3, default=None),
        Field("adding_replicas", "nint32s", tag=4, default=None),
        Field("leader_recovery_state", "int8", tag=5, default=-1),
        Field("directories", "nuuids", versions=1, tag=8, default=None),
    )


@dataclass(slots=True)
class FenceBrokerRecord(MetadataRecord):
    id: int = 0
    epoch: int = 0

    API_KEY: ClassVar[int] = 7
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("id", "int32"), Field("epoch", "int64"))


@dataclass(slots=True)
class UnfenceBrokerRecord(MetadataRecord):
    id: int = 0
    epoch: int = 0

    API_KEY: ClassVar[int] = 8
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("id", "int32"), Field("epoch", "int64"))


@dataclass(slots=True)
class RemoveTopicRecord(MetadataRecord):
    topic_id: uuid.UUID = ZERO_UUID

    API_KEY: ClassVar[int] = 9
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("topic_id", "uuid"),)


@dataclass(slots=True)
class FeatureLevelRecord(MetadataRecord):
    name: str = ""
    feature_level: int = 0

    API_KEY: ClassVar[int] = 12
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", "string"), Field("feature_level", "int16"))


@dataclass(slots=True)
class ProducerIdsRecord(MetadataRecord):
    broker_id: int = 0
    broker_epoch: int = 0
    next_producer_id: int = 0

    API_KEY: ClassVar[int] = 15
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("broker_id", "int32"),
        Field("broker_epoch", "int64"),
        Field("next_producer_id", "int64"),
    )


@dataclass(slots=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    broker_id: int = 0
    broker_epoch: int = 0
    fenced: int = 0  # -1 unfenced, 0 unchanged, 1 fenced
    in_controlled_shutdown: int = 0
    # v2 (KIP-858): the broker's log directories still online; empty: unchanged (Kafka)
    log_dirs: list[uuid.UUID] = field(default_factory=list)

    API_KEY: ClassVar[int] = 17
    VERSION: ClassVar[int] = 2
    MAX_VERSION: ClassVar[int] = 2
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("broker_id", "int32"),
        Field("broker_epoch", "int64"),
        Field("fenced", "int8", tag=0, default=0),
        Field("in_controlled_shutdown", "int8", tag=1, default=0),
        Field("log_dirs", "uuids", versions=2, tag=2, default=[]),
    )


@dataclass(slots=True)
class NoOpRecord(MetadataRecord):
    API_KEY: ClassVar[int] = 20
    FIELDS: ClassVar[tuple[Field, ...]] = ()


@dataclass(slots=True)
class UserScramCredentialRecord(MetadataRecord):
    """A user's SCRAM credential (never the password): mechanism 1 SCRAM-SHA-256,
    2 SCRAM-SHA-512 (Kafka's ScramMechanism type)."""

    name: str = ""
    mechanism: int = 0
    salt: bytes = b""
    stored_key: bytes = b""
    server_key: bytes = b""
    iterations: int = 0

    API_KEY: ClassVar[int] = 11
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("name", "string"),
        Field("mechanism", "int8"),
        Field("salt", "bytes"),
        Field("stored_key", "bytes"),
        Field("server_key", "bytes"),
        Field("iterations", "int32"),
    )

    def __repr__(self) -> str:  # the keys stay out of logs
        return f"UserScramCredentialRecord(name={self.name!r}, mechanism={self.mechanism})"


@dataclass(slots=True)
class RemoveUserScramCredentialRecord(MetadataRecord):
    name: str = ""
    mechanism: int = 0

    API_KEY: ClassVar[int] = 22
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("name", "string"), Field("mechanism", "int8"))


# --- issue 16: ACLs and client quotas --------------------------------------------------------


@dataclass(slots=True)
class AccessControlEntryRecord(MetadataRecord):
    """One ACL binding; its id is what RemoveAccessControlEntryRecord names."""

    id: uuid.UUID = ZERO_UUID
    resource_type: int = 0
    resource_name: str = ""
    pattern_type: int = 0
    principal: str = ""
    host: str = ""
    operation: int = 0
    permission_type: int = 0

    API_KEY: ClassVar[int] = 18
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("id", "uuid"),
        Field("resource_type", "int8"),
        Field("resource_name", "string"),
        Field("pattern_type", "int8"),
        Field("principal", "string"),
        Field("host", "string"),
        Field("operation", "int8"),
        Field("permission_type", "int8"),
    )


@dataclass(slots=True)
class RemoveAccessControlEntryRecord(MetadataRecord):
    id: uuid.UUID = ZERO_UUID

    API_KEY: ClassVar[int] = 19
    FIELDS: ClassVar[tuple[Field, ...]] = (Field("id", "uuid"),)


@dataclass(slots=True)
class QuotaEntityData(_Struct):
    entity_type: str = ""  # "user" or "client-id"
    entity_name: str | None = None  # None: the default entity of that type

    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("entity_type", "string"),
        Field("entity_name", "nstring"),
    )


@dataclass(slots=True)
class ClientQuotaRecord(MetadataRecord):
    entity: list[QuotaEntityData] = field(default_factory=list)
    key: str = ""
    value: float = 0.0
    remove: bool = False

    API_KEY: ClassVar[int] = 14
    FIELDS: ClassVar[tuple[Field, ...]] = (
        Field("entity", QuotaEntityData),
        Field("key", "string"),
        Field("value", "float64"),
        Field("remove", "bool"),
    )


RECORD_TYPES: dict[int, type[MetadataRecord]] = {
    cls.API_KEY: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ProducerIdsRecord,
        BrokerRegistrationChangeRecord,
        NoOpRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        ClientQuotaRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
    )
}


# --- the generic codec -------------------------------------------------------------------------


def _read_value(r: Reader, kind: Any) -> Any:
    if isinstance(kind, type):
        n = r.compact_array_len()
        if n is None:
            raise ProtocolError("null where an array is required")
        return [_read_struct(r, kind, 0) for _ in range(n)]
    if kind == "int8":
        return r.int8()
    if kind == "int16":
        return r.int16()
    if kind == "uint16":
        return r.uint16()
    if kind == "int32":
        return r.int32()
    if kind == "int64":
        return r.int64()
    if kind == "bool":
        return r.boolean()
    if kind == "uuid":
        return r.uuid()
    if kind == "float64":
        return r.float64()
    if kind == "string":
        return r.compact_string()
    if kind == "nstring":
        return r.compact_nullable_string()
    if kind == "int32s":
        return r.compact_int32_array()
    if kind == "nint32s":
        return r.compact_int32_array(nullable=True)
    if kind == "uuids":
        return r.compact_uuid_array()
    if kind == "nuuids":
        n = r.compact_array_len()
        return None if n is None else [r.uuid() for _ in range(n)]
    if kind == "bytes":
        return bytes(r.compact_bytes())
    raise AssertionError(kind)


def _write_value(w: Writer, kind: Any, value: Any) -> None:
    if isinstance(kind, type):
        w.write_uvarint(len(value) + 1)
        for item in value:
            _write_struct(w, item, 0)
        return
    if kind in ("int32s", "nint32s"):
        w.write_compact_int32_array(value)
    elif kind in ("uuids", "nuuids"):  # a null is never written: it is a tag's default
        w.write_compact_uuid_array(value)
    elif kind in ("string", "nstring"):
        w.write_compact_nullable_string(value)
    elif kind == "bytes":
        w.write_compact_bytes(value)
    else:
        getattr(w, "write_" + {"bool": "boolean"}.get(kind, kind))(value)


def _read_struct(r: Reader, cls: type, version: int) -> Any:
    values: dict[str, Any] = {}
    tagged = {f.tag: f for f in cls.FIELDS if f.tag is not None and version >= f.versions}
    for f in cls.FIELDS:
        if f.tag is None and version >= f.versions:
            values[f.attr] = _read_value(r, f.kind)
    for tag, raw in r.tagged_fields().items():
        f = tagged.get(tag)
        if f is None:
            continue  # unknown tags are skipped, as Kafka does
        sub = Reader(raw)
        values[f.attr] = _read_value(sub, f.kind)
        if sub.remaining():
            raise ProtocolError(f"tagged field {tag} has {sub.remaining()} trailing bytes")
    return cls(**values)


def _write_struct(w: Writer, obj: Any, version: int) -> None:
    tagged: dict[int, bytes] = {}
    for f in type(obj).FIELDS:
        if version < f.versions:
            continue
        value = getattr(obj, f.attr)
        if f.tag is None:
            _write_value(w, f.kind, value)
        elif value != f.default:
            sub = Writer()
            _write_value(sub, f.kind, value)
            tagged[f.tag] = sub.getvalue()
    w.write_tagged_fields(tagged)


def encode_record(record: MetadataRecord) -> bytes:
    """The record value as Kafka stores it in __cluster_metadata."""
    w = Writer()
    w.write_uvarint(FRAME_VERSION)
    w.write_uvarint(record.API_KEY)
    w.write_uvarint(record.VERSION)
    _write_struct(w, record, record.VERSION)
    return w.getvalue()


def decode_record(value: bytes | memoryview) -> MetadataRecord:
    """Parse a record value; bad input raises ProtocolError only."""
    r = Reader(value)
    frame = r.uvarint()
    if frame != FRAME_VERSION:
        raise ProtocolError(f"unknown metadata record frame version {frame}")
    api_key = r.uvarint()
    cls = RECORD_TYPES.get(api_key)
    if cls is None:
        raise ProtocolError(f"unknown metadata record type {api_key}")
    version = r.uvarint()
    if version > cls.MAX_VERSION:
        raise ProtocolError(f"unsupported version {version} of {cls.__name__}")
    record = _read_struct(r, cls, version)
    if r.remaining():
        raise ProtocolError(f"{r.remaining()} trailing bytes after {cls.__name__}")
    return record


def record_fields(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]
