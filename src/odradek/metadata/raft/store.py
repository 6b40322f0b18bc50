"""The persistent election state: current epoch, the vote cast in it, the leader known in it.

Kafka keeps these in `quorum-state`; we do the same. The quorum writes them through a
`QuorumStateStore` before a vote is granted or an epoch is adopted, so a voter that crashes and
restarts can never vote twice in one epoch nor go back to an older epoch (Raft's election safety
rests on this). `FileQuorumStateStore` writes a temporary file, fsyncs it, renames it over the
old one and fsyncs the directory; `MemoryQuorumStateStore` is for the simulation, and can be told
to forget on a crash to show what the durable write is for.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


@dataclass(frozen=True, slots=True)
class ElectionState:
    epoch: int = 0
    voted_for: int | None = None
    leader_id: int | None = None


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState: ...

    def write(self, state: ElectionState) -> None: ...


class MemoryQuorumStateStore:
    """Durable across a simulated crash unless `durable=False` (then a crash forgets everything)."""

    def __init__(self, durable: bool = True) -> None:
        self.durable = durable
        self.state = ElectionState()
        self.writes = 0

    def read(self) -> ElectionState:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state
        self.writes += 1

    def crash(self) -> None:
        if not self.durable:
            self.state = ElectionState()


class FileQuorumStateStore:
    FILE_NAME = "quorum-state"

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.path = self.directory / self.FILE_NAME

    def read(self) -> ElectionState:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return ElectionState()
        data = json.loads(raw)
        if data.get("data_version") != 1:
            raise ValueError(f"{self.path}: unknown data_version {data.get('data_version')!r}")
        return ElectionState(
            epoch=int(data["leaderEpoch"]),
            voted_for=data.get("votedId"),
            leader_id=data.get("leaderId"),
        )

    def write(self, state: ElectionState) -> None:
        # field names follow Kafka's quorum-state JSON, with our own version marker
        body = json.dumps(
            {
                "data_version": 1,
                "leaderEpoch": state.epoch,
                "votedId": state.voted_for,
                "leaderId": state.leader_id,
            }
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.FILE_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
