"""Bytes the quorum parses itself, fuzzed: control record values, snapshot files, batches a
leader sends a follower. Bad input raises the one documented error, or is refused whole."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.metadata.raft.control import decode_leader_change, encode_leader_change
from odradek.metadata.raft.file_log import FileRaftLog
from odradek.metadata.raft.log import SnapshotId
from odradek.metadata.records import TopicRecord
from odradek.metadata.snapshot import SnapshotDamaged, decode_snapshot, encode_snapshot
from odradek.protocol.errors import ProtocolError
from odradek.protocol.records import iter_batches

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

_SNAPSHOT = encode_snapshot(SnapshotId(7, 2), [TopicRecord(f"t{i}", uuid.UUID(int=i + 1))
                                                for i in range(5)])
_LEADER = FileRaftLog.open(Path(tempfile.mkdtemp()) / "leader")
for _epoch in (1, 1, 2):
    _LEADER.append_as_leader(_epoch, [b"value-%d" % _epoch] * 3)
_BATCHES = _LEADER.read(0)


def _positions() -> list[int]:
    out, pos = [], 0
    for _, batch in iter_batches(_BATCHES):
        out.append(pos)
        pos += len(batch)
    return out


@FUZZ
@given(st.integers(0, 2**31 - 1), st.lists(st.integers(0, 2**31 - 1), max_size=5),
       st.lists(st.integers(0, 2**31 - 1), max_size=5))
def test_leader_change_round_trips(leader: int, voters: list[int], granting: list[int]) -> None:
    got = decode_leader_change(encode_leader_change(leader, voters, granting))
    assert got == (leader, sorted(voters), sorted(granting))


@FUZZ
@given(st.binary(max_size=200))
def test_leader_change_garbage_raises_protocol_error_only(data: bytes) -> None:
    try:
        decode_leader_change(data)
    except ProtocolError:
        pass


@FUZZ
@given(st.data())
def test_a_mutated_snapshot_is_damaged_or_still_whole(data: st.DataObject) -> None:
    raw = bytearray(_SNAPSHOT)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    try:
        records = decode_snapshot(bytes(raw[:cut]))
    except SnapshotDamaged:
        return
    # a mutation the CRCs let through can only be in the unchecked batch prefix (offsets,
    # length kept whole): the records are the snapshot's own
    assert [r.name for r in records] == [f"t{i}" for i in range(5)]  # type: ignore[attr-defined]


@FUZZ
@given(st.data())
def test_a_follower_appends_only_whole_good_batches(data: st.DataObject) -> None:
    raw = bytearray(_BATCHES)
    # any byte but a batch's partition leader epoch and magic (bytes 12-16), which nothing
    # covers (as in Kafka): offsets are checked for order, the rest by the CRC
    positions = [p for p in range(len(raw))
                 if not any(s + 12 <= p < s + 17 for s in _positions())]
    if data.draw(st.booleans()):
        i = data.draw(st.sampled_from(positions))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with tempfile.TemporaryDirectory() as d:
        follower = FileRaftLog.open(Path(d))
        try:
            appended = follower.append_as_follower(bytes(raw[:cut]))
        except Exception as exc:  # a bad length or magic is refused as input, never half-written
            assert isinstance(exc, (ProtocolError, ValueError)) or "INVALID" in str(exc) \
                or "CORRUPT" in str(exc), exc
            appended = 0
        # whatever it took is exactly a prefix of the leader's log
        mine = follower.read(0)
        assert _BATCHES.startswith(mine) and follower.end_offset() == appended
        follower.close()
