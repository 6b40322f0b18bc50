"""Connect's group subprotocol (protocol type "connect", eager protocol "default"): the
worker metadata members send in JoinGroup and the assignments the leader hands out in
SyncGroup, in Kafka's binary layout (ConnectProtocol v0), plus the leader's assignor.

Metadata: version int16, url string, config-offset int64.
Assignment: version int16, error int16, leader string, leader-url string, config-offset
int64, [connector string, tasks [int32]] where task -1 means the connector itself.
Strings are int16-length UTF-8, arrays int32-counted, big-endian, as Kafka's Struct writes.

The assignor keeps a connector and its tasks on one worker: here a connector's tasks are the
partitions of its one Spark query, which cannot be split across processes. It is sticky: a
connector stays with the member that runs it now (the worker connect-status names, when that
worker is still a member and not over its share), so a rebalance restarts only the Spark
queries that must move; the rest are spread over the least loaded members, ties broken by
member id, so every leader computes the same answer from the same inputs.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

PROTOCOL_TYPE = "connect"
EAGER = "default"
VERSION = 0
CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class ProtocolError(ValueError):
    """Bytes that are not a Connect metadata or assignment."""


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int


@dataclass(frozen=True)
class Assignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...] = ()
    tasks: tuple[tuple[str, int], ...] = ()

    def connector_names(self) -> set[str]:
        return set(self.connectors) | {name for name, _ in self.tasks}


def _string(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > 0x7FFF:
        raise ProtocolError("a string longer than 32767 bytes")
    return _I16.pack(len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError(f"truncated at byte {self.pos} (wanted {n})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return int(_I16.unpack(self.take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self.take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise ProtocolError("a null string where Connect writes one")
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"a string that is not UTF-8: {exc}") from None

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.data) - self.pos:
            raise ProtocolError(f"an array of {n} items in {len(self.data) - self.pos} bytes")
        return n

    def version(self) -> int:
        version = self.i16()
        if version < VERSION:
            raise ProtocolError(f"Unsupported subscription version: {version}")
        return version


def encode_metadata(state: WorkerState) -> bytes:
    return _I16.pack(VERSION) + _string(state.url) + _I64.pack(state.config_offset)


def decode_metadata(data: bytes) -> WorkerState:
    reader = _Reader(data)
    reader.version()  # later versions start with v0's fields (Kafka reads them so too)
    return WorkerState(reader.string(), reader.i64())


def encode_assignment(a: Assignment) -> bytes:
    per: dict[str, list[int]] = {}
    for name in a.connectors:
        per.setdefault(name, []).append(CONNECTOR_TASK)
    for name, task in a.tasks:
        per.setdefault(name, []).append(task)
    out = [_I16.pack(VERSION), _I16.pack(a.error), _string(a.leader), _string(a.leader_url),
           _I64.pack(a.config_offset), _I32.pack(len(per))]
    for name, tasks in per.items():
        out.append(_string(name) + _I32.pack(len(tasks)) + b"".join(_I32.pack(t) for t in tasks))
    return b"".join(out)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    reader.version()
    error, leader, url, offset = reader.i16(), reader.string(), reader.string(), reader.i64()
    connectors: list[str] = []
    tasks: list[tuple[str, int]] = []
    for _ in range(reader.count()):
        name = reader.string()
        for _ in range(reader.count()):
            task = reader.i32()
            if task == CONNECTOR_TASK:
                connectors.append(name)
            else:
                tasks.append((name, task))
    return Assignment(error, leader, url, offset, tuple(connectors), tuple(tasks))


@dataclass
class Plan:
    """The leader's answer: member id -> its assignment."""

    assignments: dict[str, Assignment] = field(default_factory=dict)


def assign(leader: str, members: Mapping[str, WorkerState], config_offset: int,
           connectors: Mapping[str, int], owners: Mapping[str, str] | None = None) -> Plan:
    """`connectors`: name -> task count, as the leader's config view says at `config_offset`;
    `owners`: name -> the URL of the worker running it now, where known.

    When a member has read further in connect-configs than the leader, the leader cannot
    assign what it has not read: every member gets CONFIG_MISMATCH (Kafka's rule) and joins
    again after reading to the end."""
    leader_url = members[leader].url
    newest = max(state.config_offset for state in members.values())
    if newest > config_offset:
        return Plan({m: Assignment(CONFIG_MISMATCH, leader, leader_url, newest)
                     for m in members})
    order = sorted(members)
    by_url = {members[m].url: m for m in order}
    share = -(-len(connectors) // len(order)) if order else 0  # ceil
    mine: dict[str, list[str]] = {m: [] for m in order}
    loose: list[str] = []
    for name in sorted(connectors):
        owner = by_url.get((owners or {}).get(name, ""))
        if owner is not None and len(mine[owner]) < share:
            mine[owner].append(name)
        else:
            loose.append(name)
    for name in loose:
        least = min(order, key=lambda m: (len(mine[m]), m))
        mine[least].append(name)
    return Plan({m: Assignment(NO_ERROR, leader, leader_url, config_offset,
                               tuple(sorted(names)),
                               tuple((n, t) for n in sorted(names) for t in range(connectors[n])))
                 for m, names in mine.items()})


def protocols(state: WorkerState) -> Sequence[tuple[str, bytes]]:
    """The (name, metadata) pairs a worker's JoinGroup offers."""
    return [(EAGER, encode_metadata(state))]
