"""The quorum's messages as plain dataclasses, mirroring Kafka's KIP-595 APIs.

Vote (with KIP-996's PreVote flag), BeginQuorumEpoch, EndQuorumEpoch and Fetch, requests and
responses. Every response names the responder's epoch and known leader, as Kafka's do, so a
stale node learns the current epoch from any answer. The transport (later) maps these to the
wire with kio; here they are what the state machine consumes and produces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.metadata.raft.log import SnapshotId
from odradek.protocol.errors import ErrorCode

NONE = int(ErrorCode.none)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.not_leader_or_follower)
FENCED_LEADER_EPOCH = int(ErrorCode.fenced_leader_epoch)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.unknown_leader_epoch)
INVALID_REQUEST = int(ErrorCode.invalid_request)
INCONSISTENT_VOTER_SET = int(ErrorCode.inconsistent_voter_set)
SNAPSHOT_NOT_FOUND = int(ErrorCode.snapshot_not_found)
POSITION_OUT_OF_RANGE = int(ErrorCode.position_out_of_range)


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_epoch: int  # the epoch the candidate stands in (current + 1 for a pre-vote)
    candidate_id: int
    last_offset_epoch: int  # epoch of the candidate's last log entry
    last_offset: int  # the candidate's log end offset
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: int
    leader_epoch: int
    leader_id: int | None
    vote_granted: bool
    pre_vote: bool = False


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_epoch: int
    leader_id: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: int
    leader_epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_epoch: int
    leader_id: int
    preferred_successors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: int
    leader_epoch: int
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class FetchRequest:
    current_leader_epoch: int
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 0  # the leader may hold an empty answer this long (a long poll)


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """The leader's answer when the follower's log diverges: the largest epoch the leader has
    that is <= the follower's last fetched epoch, and where that epoch ends in the leader's log."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: int
    leader_epoch: int
    leader_id: int | None
    high_watermark: int
    records: Any = ()  # the log's own kind: Entries in memory, record batches (bytes) on disk
    diverging_epoch: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None  # fetch below the leader's log start: get this first


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    current_leader_epoch: int
    replica_id: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: int
    leader_epoch: int
    leader_id: int | None
    snapshot_id: SnapshotId
    size: int = 0
    position: int = 0
    data: bytes = b""


Body = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)


@dataclass(frozen=True, slots=True)
class Message:
    """One message between voters. A response carries its request's correlation id."""

    src: int
    dst: int
    correlation_id: int
    body: Body
