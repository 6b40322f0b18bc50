"""MirrorMaker 2's bookkeeping, sans I/O: replication policies, topic and group filters, the
binary records of its internal topics, when an offset sync is due, and the offset-sync store
that translates a consumer group's upstream offsets into downstream ones.

Record formats are MM2's (Kafka's protocol Struct encoding: INT16/INT32/INT64 big-endian,
STRING as an INT16 length and UTF-8 bytes), so MM2's own tools read what we write:
- offset sync (`mm2-offset-syncs.<target>.internal`): key {topic, partition}, value
  {upstreamOffset INT64, offset INT64};
- checkpoint (`<source>.checkpoints.internal`): key {group, topic, partition}, value a version
  header INT16 (0) then {upstreamOffset INT64, offset INT64, metadata STRING}; the topic is
  the downstream (renamed) one;
- heartbeat (`heartbeats`): key {sourceClusterAlias, targetClusterAlias}, value a version
  header INT16 (0) then {timestamp INT64}.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass

DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
POLICIES = (DEFAULT_POLICY, IDENTITY_POLICY)

TOPICS_EXCLUDE = r".*[\-\.]internal, .*\.replica, __.*"
GROUPS_EXCLUDE = r"console-consumer-.*, connect-.*, __.*"
CONFIGS_EXCLUDE = (r"follower\.replication\.throttled\.replicas, "
                   r"leader\.replication\.throttled\.replicas, "
                   r"message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, "
                   r"unclean\.leader\.election\.enable, min\.insync\.replicas")
HEARTBEATS = "heartbeats"


# ---- replication policies ---------------------------------------------------------------------
@dataclass(frozen=True)
class ReplicationPolicy:
    """DefaultReplicationPolicy (`<alias><sep><topic>`) or IdentityReplicationPolicy (the
    topic keeps its name; only heartbeats are renamed, as MM2 does, so cycles stay visible)."""

    kind: str = DEFAULT_POLICY
    separator: str = "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self.kind == IDENTITY_POLICY and topic != HEARTBEATS:
            return topic
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias a remote topic came from (None: a local topic, as far as names say)."""
        if self.kind == IDENTITY_POLICY and not topic.endswith(self.separator + HEARTBEATS):
            return None
        head, sep, _ = topic.partition(self.separator)
        return head if sep else None

    def offset_syncs_topic(self, alias: str) -> str:
        return f"mm2-offset-syncs{self.separator}{alias}{self.separator}internal"

    def checkpoints_topic(self, alias: str) -> str:
        return f"{alias}{self.separator}checkpoints{self.separator}internal"

    def is_internal(self, topic: str) -> bool:
        # Kafka's own (`__`, `.`), MM2's and Connect's default internal topics
        return topic.startswith(("__", ".")) or topic.endswith(("-internal", ".internal"))


def patterns(raw: str) -> list[re.Pattern[str]]:
    """A comma-separated list of regexes (Kafka's LIST of patterns)."""
    return [re.compile(p.strip()) for p in raw.split(",") if p.strip()]


@dataclass(frozen=True)
class NameFilter:
    """MM2's DefaultTopicFilter and DefaultGroupFilter: an include list, then an exclude list."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]

    @classmethod
    def of(cls, include: str, exclude: str) -> NameFilter:
        return cls(tuple(patterns(include)), tuple(patterns(exclude)))

    def __call__(self, name: str) -> bool:
        return (any(p.fullmatch(name) for p in self.include)
                and not any(p.fullmatch(name) for p in self.exclude))


def replicated(topic: str, names: NameFilter, policy: ReplicationPolicy, target: str) -> bool:
    """Whether MirrorSourceConnector copies `topic`: it passes the filter, is not an internal
    topic, and did not come from the target cluster (no replication cycle). Heartbeats always
    go, as in MM2."""
    if topic == HEARTBEATS or topic.endswith("." + HEARTBEATS):
        return policy.topic_source(topic) != target
    if policy.is_internal(topic) or not names(topic):
        return False
    return policy.topic_source(topic) != target


def config_excluded(name: str, exclude: Iterable[re.Pattern[str]]) -> bool:
    return any(p.fullmatch(name) for p in exclude)


# ---- Kafka protocol Struct encoding -----------------------------------------------------------
def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError("record too short")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return int(value)

    def string(self) -> str:
        size = self.take(">h")
        if size < 0 or self.pos + size > len(self.data):
            raise ValueError("bad string length")
        text = self.data[self.pos:self.pos + size].decode()
        self.pos += size
        return text


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream, self.downstream)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = _Reader(key), _Reader(value)
        topic, partition = k.string(), k.take(">i")
        return cls(topic, partition, v.take(">q"), v.take(">q"))


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the downstream topic
    partition: int
    upstream: int
    downstream: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return (struct.pack(">hqq", 0, self.upstream, self.downstream)
                + _string(self.metadata))

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = _Reader(key), _Reader(value)
        group, topic, partition = k.string(), k.string(), k.take(">i")
        version = v.take(">h")
        if version != 0:
            raise ValueError(f"unknown checkpoint version {version}")
        return cls(group, topic, partition, v.take(">q"), v.take(">q"), v.string())


@dataclass(frozen=True)
class Heartbeat:
    source: str
    target: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source) + _string(self.target)

    def value(self) -> bytes:
        return struct.pack(">hq", 0, self.timestamp)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = _Reader(key), _Reader(value)
        source, target = k.string(), k.string()
        if v.take(">h") != 0:
            raise ValueError("unknown heartbeat version")
        return cls(source, target, v.take(">q"))


# ---- when MirrorSourceTask emits an offset sync -----------------------------------------------
class PartitionState:
    """One partition's replication, as MM2's MirrorSourceTask.PartitionState judges it: a sync
    is due at the first record of this task's life, when the sync the checkpoints would use
    is `max_lag` or more records behind, when upstream offsets skipped (compaction,
    transactions' markers) or when the downstream topic went backwards (truncated)."""

    def __init__(self, max_lag: int) -> None:
        self.max_lag = max_lag
        self.last_sync_downstream = -1
        self.previous_upstream = -1
        self.previous_downstream = -1
        self.pending: tuple[int, int] | None = None  # the newest pair not yet synced

    def update(self, upstream: int, downstream: int) -> bool:
        first = self.last_sync_downstream == -1
        # translation lands one past the last sync, hence the +1
        stale = downstream - (self.last_sync_downstream + 1) >= self.max_lag
        skipped = upstream - self.previous_upstream != 1
        truncated = downstream < self.previous_downstream
        self.previous_upstream, self.previous_downstream = upstream, downstream
        if first or stale or skipped or truncated:
            self.last_sync_downstream = downstream
            self.pending = None
            return True
        self.pending = (upstream, downstream)
        return False

    def promote(self) -> tuple[int, int] | None:
        """The newest unsynced pair, synced now (MM2 promotes its delayed sync at commit):
        a group that stopped at a batch's end then translates exactly."""
        pair, self.pending = self.pending, None
        if pair is not None:
            self.last_sync_downstream = pair[1]
        return pair


# ---- MM2's OffsetSyncStore ------------------------------------------------------------------
SLOTS = 64


class OffsetSyncStore:
    """Offset syncs per upstream partition, kept so translation stays close near the live end
    and coarser further back (MM2's invariant: slot 0 is the newest sync, and for i <= j,
    syncs[j].upstream <= syncs[i].upstream < syncs[j].upstream + 2**j).

    Translation is conservative: the group's upstream offset g maps through the newest sync s
    with s.upstream <= g; exactly s.downstream when g == s.upstream, else s.downstream + 1
    (records between s and g may or may not have been replicated, so it cannot skip ahead
    more without risking loss). A group behind every kept sync is not translated (-1), nor
    is anything before the syncs topic was read to its end once."""

    def __init__(self) -> None:
        self.syncs: dict[tuple[str, int], list[OffsetSync]] = {}
        self.read_to_end = False

    def add(self, sync: OffsetSync) -> None:
        tp = (sync.topic, sync.partition)
        slots = self.syncs.get(tp)
        if slots is None or not self.read_to_end or slots[0].upstream > sync.upstream:
            # Before the first read to the end, or an upstream that went back: only the
            # newest is trustworthy.
            self.syncs[tp] = [sync] * SLOTS
            return
        slots[0] = sync
        for i in range(1, SLOTS):
            mask = ((1 << 63) - 1) << i  # Long.MAX_VALUE << i, as a 64-bit mask
            if (slots[i].upstream ^ sync.upstream) & mask & ((1 << 64) - 1):
                slots[i] = sync
            else:
                break

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """The downstream offset for a group at `upstream`: None (no sync known, or the
        store not read through yet), -1 (too far back to translate), or the offset."""
        if not self.read_to_end:
            return None
        slots = self.syncs.get((topic, partition))
        if slots is None:
            return None
        sync = slots[-1]
        for candidate in slots:
            if candidate.upstream <= upstream:
                sync = candidate
                break
        if sync.upstream > upstream:
            return -1
        return sync.downstream + (0 if upstream == sync.upstream else 1)
