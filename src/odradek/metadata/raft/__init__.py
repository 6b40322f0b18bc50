"""The KRaft metadata quorum as a sans-I/O state machine (issue 14, first brick).

Shaped as Kafka's raft module: `QuorumState` holds one `EpochState` per role (Unattached,
Voted, Prospective, Candidate, Leader, Follower, Resigned) and checks every transition in one
table (`state.py`); `RaftClient` (`client.py`) reacts to messages (`messages.py`) and to time
(`poll(now_ms)`) and returns the messages to send. The log (`log.py`, `file_log.py`) and the
persistent election state (`store.py`) are injected. The state machine does no I/O; `kraft.py`
drives it on asyncio (the node's `KRaftQuorum`) and `wire.py` maps its messages to Kafka's.
"""

from __future__ import annotations

from odradek.metadata.raft.client import RaftClient, RaftConfig
from odradek.metadata.raft.log import Entry, MemoryRaftLog, RaftLog
from odradek.metadata.raft.state import QuorumState, Role
from odradek.metadata.raft.store import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumStateStore,
)

__all__ = [
    "ElectionState",
    "Entry",
    "FileQuorumStateStore",
    "MemoryQuorumStateStore",
    "MemoryRaftLog",
    "QuorumState",
    "QuorumStateStore",
    "RaftClient",
    "RaftConfig",
    "RaftLog",
    "Role",
]
