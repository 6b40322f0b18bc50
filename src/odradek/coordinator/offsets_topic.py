"""The records of `__consumer_offsets`, as Kafka 3.9 writes them.

Every record's key starts with an int16 "key version" that names the record
type (0/1 offset commit, 2 classic group metadata, 3-8 KIP-848 consumer group
records); the value starts with its own int16 schema version. A null value is
a tombstone. The partition of a group is `abs(java hashCode(group id)) % n`
like Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`.

Schemas are small field lists walked by one reader/writer, so a new record
type is a table entry, not code. Decoding goes through the checked Reader:
a corrupt record raises ProtocolError, never allocates from a bad length.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import Reader, Writer

TOPIC = "__consumer_offsets"

# key versions = record types
OFFSET_COMMIT_KEY = 1  # 0 is the same layout
GROUP_METADATA_KEY = 2
CONSUMER_GROUP_METADATA_KEY = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 8


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --------------------------------------------------------------------------- #
# a tiny schema walker

# field types: "i8" "i16" "i32" "i64" "str" "nstr" "bytes" "uuid" "[i32]" "[str]",
# a nested schema (list of fields) for an array of structs, or ("tagged", tag, schema) for
# an optional struct carried as a tagged field of a flexible version (None when absent)
Field = tuple[str, Any]

_TP: list[Field] = [("topic_id", "uuid"), ("partitions", "[i32]")]

_MEMBER_V0: list[Field] = [
    ("member_id", "str"), ("client_id", "str"), ("client_host", "str"),
    ("session_timeout", "i32"), ("subscription", "bytes"), ("assignment", "bytes")]
_MEMBER_V1: list[Field] = [
    ("member_id", "str"), ("client_id", "str"), ("client_host", "str"),
    ("rebalance_timeout", "i32"), ("session_timeout", "i32"), ("subscription", "bytes"),
    ("assignment", "bytes")]
_MEMBER_V3: list[Field] = [
    ("member_id", "str"), ("group_instance_id", "nstr"), ("client_id", "str"),
    ("client_host", "str"), ("rebalance_timeout", "i32"), ("session_timeout", "i32"),
    ("subscription", "bytes"), ("assignment", "bytes")]
# a classic-protocol member of a KIP-848 group (KIP-848's online migration): its JoinGroup
# session timeout and protocols, tag 0 of ConsumerGroupMemberMetadataValue
_CLASSIC_MEMBER: list[Field] = [
    ("session_timeout_ms", "i32"),
    ("supported_protocols", [("name", "str"), ("metadata", "bytes")])]
_GROUP_HEAD: list[Field] = [
    ("protocol_type", "str"), ("generation", "i32"), ("protocol", "nstr"), ("leader", "nstr")]

# (schema, flexible) per value version, per record type
VALUE_SCHEMAS: dict[int, dict[int, tuple[list[Field], bool]]] = {
    OFFSET_COMMIT_KEY: {
        0: ([("offset", "i64"), ("metadata", "str"), ("commit_timestamp", "i64")], False),
        1: ([("offset", "i64"), ("metadata", "str"), ("commit_timestamp", "i64"),
             ("expire_timestamp", "i64")], False),
        2: ([("offset", "i64"), ("metadata", "str"), ("commit_timestamp", "i64")], False),
        3: ([("offset", "i64"), ("leader_epoch", "i32"), ("metadata", "str"),
             ("commit_timestamp", "i64")], False),
        4: ([("offset", "i64"), ("leader_epoch", "i32"), ("metadata", "str"),
             ("commit_timestamp", "i64")], True),
    },
    GROUP_METADATA_KEY: {
        0: ([*_GROUP_HEAD, ("members", _MEMBER_V0)], False),
        1: ([*_GROUP_HEAD, ("members", _MEMBER_V1)], False),
        2: ([*_GROUP_HEAD, ("current_state_timestamp", "i64"), ("members", _MEMBER_V1)], False),
        3: ([*_GROUP_HEAD, ("current_state_timestamp", "i64"), ("members", _MEMBER_V3)], False),
        4: ([*_GROUP_HEAD, ("current_state_timestamp", "i64"), ("members", _MEMBER_V3)], True),
    },
    CONSUMER_GROUP_METADATA_KEY: {0: ([("epoch", "i32")], True)},
    CONSUMER_GROUP_PARTITION_METADATA_KEY: {0: ([("topics", [
        ("topic_id", "uuid"), ("topic_name", "str"), ("num_partitions", "i32"),
        ("partition_metadata", [("partition", "i32"), ("racks", "[str]")])])], True)},
    CONSUMER_GROUP_MEMBER_METADATA_KEY: {0: ([
        ("instance_id", "nstr"), ("rack_id", "nstr"), ("client_id", "str"), ("client_host", "str"),
        ("subscribed_topic_names", "[str]"), ("subscribed_topic_regex", "nstr"),
        ("rebalance_timeout_ms", "i32"), ("server_assignor", "nstr"),
        ("classic_member_metadata", ("tagged", 0, _CLASSIC_MEMBER))], True)},
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: {0: ([("assignment_epoch", "i32")], True)},
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: {0: ([("topic_partitions", _TP)], True)},
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: {0: ([
        ("member_epoch", "i32"), ("previous_member_epoch", "i32"), ("state", "i8"),
        ("assigned_partitions", _TP), ("partitions_pending_revocation", _TP)], True)},
}

# the value version written for each record type (Kafka 3.9's choices)
WRITE_VERSION = {
    OFFSET_COMMIT_KEY: 3, GROUP_METADATA_KEY: 3, CONSUMER_GROUP_METADATA_KEY: 0,
    CONSUMER_GROUP_PARTITION_METADATA_KEY: 0, CONSUMER_GROUP_MEMBER_METADATA_KEY: 0,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: 0,
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: 0,
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: 0,
}

KEY_SCHEMAS: dict[int, list[Field]] = {
    0: [("group", "str"), ("topic", "str"), ("partition", "i32")],
    OFFSET_COMMIT_KEY: [("group", "str"), ("topic", "str"), ("partition", "i32")],
    GROUP_METADATA_KEY: [("group", "str")],
    CONSUMER_GROUP_METADATA_KEY: [("group", "str")],
    CONSUMER_GROUP_PARTITION_METADATA_KEY: [("group", "str")],
    CONSUMER_GROUP_MEMBER_METADATA_KEY: [("group", "str"), ("member_id", "str")],
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY: [("group", "str")],
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY: [("group", "str"), ("member_id", "str")],
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY: [("group", "str"), ("member_id", "str")],
}


def _write(w: Writer, schema: list[Field], values: dict[str, Any], flexible: bool) -> None:
    tagged: dict[int, bytes] = {}
    for name, kind in schema:
        v = values.get(name)
        if isinstance(kind, tuple):
            if flexible and v is not None:
                sub = Writer()
                _write(sub, kind[2], v, True)
                tagged[kind[1]] = sub.getvalue()
        elif isinstance(kind, list):
            items = v or []
            if flexible:
                w.write_compact_array_len(len(items))
            else:
                w.write_array_len(len(items))
            for item in items:
                _write(w, kind, item, flexible)
        elif kind == "i8":
            w.write_int8(int(v or 0))
        elif kind == "i16":
            w.write_int16(int(v or 0))
        elif kind == "i32":
            w.write_int32(int(v if v is not None else -1))
        elif kind == "i64":
            w.write_int64(int(v if v is not None else -1))
        elif kind == "uuid":
            w.write_uuid(v)
        elif kind == "str":
            (w.write_compact_string if flexible else w.write_string)(v or "")
        elif kind == "nstr":
            (w.write_compact_nullable_string if flexible else w.write_nullable_string)(v)
        elif kind == "bytes":
            (w.write_compact_bytes if flexible else w.write_bytes_)(bytes(v or b""))
        elif kind in ("[i32]", "[str]"):
            items = v or []
            if flexible:
                w.write_compact_array_len(len(items))
            else:
                w.write_array_len(len(items))
            for item in items:
                if kind == "[i32]":
                    w.write_int32(int(item))
                else:
                    (w.write_compact_string if flexible else w.write_string)(item)
        else:  # pragma: no cover - schema tables are static
            raise AssertionError(kind)
    if flexible:
        w.write_tagged_fields(tagged)


def _read(r: Reader, schema: list[Field], flexible: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tagged: dict[int, tuple[str, list[Field]]] = {}
    for name, kind in schema:
        if isinstance(kind, tuple):
            tagged[kind[1]] = (name, kind[2])
            out[name] = None
        elif isinstance(kind, list) or kind in ("[i32]", "[str]"):
            n = r.compact_array_len() if flexible else r.array_len()
            items: list[Any] = []
            for _ in range(n or 0):
                if isinstance(kind, list):
                    items.append(_read(r, kind, flexible))
                elif kind == "[i32]":
                    items.append(r.int32())
                else:
                    items.append(r.compact_string() if flexible else r.string())
            out[name] = items
        elif kind == "i8":
            out[name] = r.int8()
        elif kind == "i16":
            out[name] = r.int16()
        elif kind == "i32":
            out[name] = r.int32()
        elif kind == "i64":
            out[name] = r.int64()
        elif kind == "uuid":
            out[name] = r.uuid()
        elif kind == "str":
            out[name] = r.compact_string() if flexible else r.string()
        elif kind == "nstr":
            out[name] = r.compact_nullable_string() if flexible else r.nullable_string()
        elif kind == "bytes":
            out[name] = bytes(r.compact_bytes() if flexible else r.bytes_())
    if flexible:
        if not tagged:
            r.skip_tagged_fields()
        else:
            for tag, raw in r.tagged_fields().items():
                if tag in tagged:  # unknown tags are a newer writer's: skipped
                    name, sub = tagged[tag]
                    out[name] = _read(Reader(raw), sub, True)
    return out


# --------------------------------------------------------------------------- #
# keys and values


@dataclass(frozen=True, slots=True)
class RecordKey:
    kind: int  # key version (record type); 0 is read as OFFSET_COMMIT_KEY
    group: str
    topic: str | None = None
    partition: int = -1
    member_id: str | None = None


def encode_key(key: RecordKey) -> bytes:
    w = Writer()
    w.write_int16(key.kind)
    _write(w, KEY_SCHEMAS[key.kind], {"group": key.group, "topic": key.topic,
                                      "partition": key.partition, "member_id": key.member_id},
           False)
    return w.getvalue()


def decode_key(data: bytes | memoryview) -> RecordKey | None:
    """The key, or None for a record type this node does not know (skipped on replay)."""
    r = Reader(data)
    kind = r.int16()
    schema = KEY_SCHEMAS.get(kind)
    if schema is None:
        return None
    v = _read(r, schema, False)
    if kind == 0:
        kind = OFFSET_COMMIT_KEY
    return RecordKey(kind, v["group"], v.get("topic"), v.get("partition", -1), v.get("member_id"))


def encode_value(kind: int, values: dict[str, Any], version: int | None = None) -> bytes:
    version = WRITE_VERSION[kind] if version is None else version
    schema, flexible = VALUE_SCHEMAS[kind][version]
    w = Writer()
    w.write_int16(version)
    _write(w, schema, values, flexible)
    return w.getvalue()


def decode_value(kind: int, data: bytes | memoryview | None) -> dict[str, Any] | None:
    """The value's fields (plus "version"); None for a tombstone."""
    if data is None:
        return None
    r = Reader(data)
    version = r.int16()
    schemas = VALUE_SCHEMAS.get(kind, {})
    if version not in schemas:
        # newer versions of the flexible records only append tagged fields
        flexible_versions = [v for v, (_, flex) in schemas.items() if flex]
        if not flexible_versions or version < 0:
            raise ProtocolError(f"unknown value version {version} of record type {kind}")
        schema, flexible = schemas[max(flexible_versions)]
    else:
        schema, flexible = schemas[version]
    out = _read(r, schema, flexible)
    out["version"] = version
    return out


# --------------------------------------------------------------------------- #
# the consumer protocol's embedded schemas (subscription and assignment bytes)


def parse_subscription_topics(metadata: bytes | memoryview) -> list[str]:
    """Topics of a ConsumerProtocolSubscription (any version); [] if it cannot be read."""
    try:
        r = Reader(metadata)
        r.int16()
        n = r.array_len() or 0
        return [r.string() for _ in range(n)]
    except (ProtocolError, UnicodeDecodeError):
        return []


def parse_assignment(assignment: bytes | memoryview) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of a ConsumerProtocolAssignment; [] if it cannot be read."""
    if not assignment:
        return []
    try:
        r = Reader(assignment)
        r.int16()
        out = []
        for _ in range(r.array_len() or 0):
            topic = r.string()
            parts = [r.int32() for _ in range(r.array_len() or 0)]
            out.append((topic, parts))
        return out
    except (ProtocolError, UnicodeDecodeError):
        return []


def encode_assignment(topics: dict[str, list[int]], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolAssignment v0 (for tests and tools)."""
    w = Writer()
    w.write_int16(0)
    w.write_array_len(len(topics))
    for topic, parts in topics.items():
        w.write_string(topic)
        w.write_array_len(len(parts))
        for p in parts:
            w.write_int32(p)
    w.write_nullable_bytes(user_data)
    return w.getvalue()


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A ConsumerProtocolSubscription v0 (for tests and tools)."""
    w = Writer()
    w.write_int16(0)
    w.write_array_len(len(topics))
    for t in topics:
        w.write_string(t)
    w.write_nullable_bytes(user_data)
    return w.getvalue()


def new_uuid() -> uuid.UUID:
    return uuid.uuid4()
