"""KRaft's control records in Kafka's encoding: LeaderChangeMessage, SnapshotHeader/Footer.

The values are kio's data schemas (the JSON files Kafka generates its classes from), written
in their flexible encoding with no version prefix, as Kafka's ControlRecordUtils does; the
record key is the control key (version int16 = 0, type int16). Decoding is bounded: bad input
raises ProtocolError only.
"""

from __future__ import annotations

import io
from typing import Any

from kio.schema.leader_change_message.v0.data import LeaderChangeMessage, Voter
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from odradek.protocol.errors import ProtocolError
from odradek.protocol.messages import scan_entity

__all__ = [
    "decode_leader_change",
    "encode_leader_change",
    "encode_snapshot_footer",
    "encode_snapshot_header",
]


def _encode(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _decode(cls: type, data: bytes | memoryview) -> Any:
    end = len(data)
    scan_entity(cls)(data, 0, end)  # bounds first: kio trusts lengths
    try:
        entity, _size = entity_reader(cls)(memoryview(data), 0)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"cannot decode {cls.__name__}: {exc}") from None
    return entity


def encode_leader_change(leader_id: int, voters: list[int], granting: list[int]) -> bytes:
    return _encode(LeaderChangeMessage(
        version=i16(0), leader_id=i32(leader_id),  # type: ignore[arg-type]
        voters=tuple(Voter(voter_id=i32(v)) for v in sorted(voters)),
        granting_voters=tuple(Voter(voter_id=i32(v)) for v in sorted(granting))))


def decode_leader_change(data: bytes | memoryview) -> tuple[int, list[int], list[int]]:
    """(leader id, voters, granting voters)."""
    msg = _decode(LeaderChangeMessage, data)
    return (int(msg.leader_id), [int(v.voter_id) for v in msg.voters],
            [int(v.voter_id) for v in msg.granting_voters])


def encode_snapshot_header(last_contained_log_timestamp: int) -> bytes:
    return _encode(SnapshotHeaderRecord(
        version=i16(0), last_contained_log_timestamp=i64(last_contained_log_timestamp)))


def encode_snapshot_footer() -> bytes:
    return _encode(SnapshotFooterRecord(version=i16(0)))


def leader_change_payload(leader_id: int, voters: frozenset[int], granting: set[int]) -> bytes:
    """Kafka's LeaderChangeMessage, the value of the control record opening every epoch."""
    return encode_leader_change(leader_id, sorted(voters), sorted(granting))
