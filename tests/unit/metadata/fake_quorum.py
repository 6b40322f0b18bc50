"""An in-memory Quorum following issue 14's extended interface (CLUSTER.md), sans-I/O:
append commits at once when leader and calls every commit listener before returning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from odradek.metadata.quorum import Quorum
from odradek.metadata.records import MetadataRecord, decode_record, encode_record
from odradek.protocol.errors import ErrorCode, KafkaError


class FakeQuorum(Quorum):
    def __init__(self, node_id: int = 1, is_leader: bool = True) -> None:
        self.node_id = node_id
        self._leader = is_leader
        self._epoch = 1
        self.log: list[tuple[int, MetadataRecord]] = []
        self.batches: list[list[tuple[int, MetadataRecord]]] = []
        self._commit_listeners: list[Callable[[list[tuple[int, Any]]], None]] = []
        self._leadership_listeners: list[Callable[[bool, int], None]] = []

    @property
    def leader_id(self) -> int | None:  # type: ignore[override]
        return self.node_id if self._leader else None

    @property
    def leader_epoch(self) -> int:
        return self._epoch

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def commit_offset(self) -> int:
        return len(self.log) - 1

    @property
    def end_offset(self) -> int:
        return len(self.log)

    def append(self, records: Sequence[MetadataRecord]) -> int:
        if not self._leader:
            raise KafkaError(ErrorCode.not_controller, "not the leader")
        if not records:
            raise ValueError("nothing to append")
        base = len(self.log)
        # through the codec, as a real log would: what we replay is what was encoded
        batch = [(base + i, decode_record(encode_record(r))) for i, r in enumerate(records)]
        self.log += batch
        self.batches.append(batch)
        for fn in list(self._commit_listeners):
            fn(list(batch))
        return base + len(records) - 1

    def replay(self, apply: Callable[[int, MetadataRecord], None], from_offset: int = 0) -> int:
        for offset, record in self.log[from_offset:]:
            apply(offset, record)
        return len(self.log)

    def add_commit_listener(self, fn: Callable[[list[tuple[int, Any]]], None]) -> None:
        self._commit_listeners.append(fn)

    def add_leadership_listener(self, fn: Callable[[bool, int], None]) -> None:
        self._leadership_listeners.append(fn)

    def set_leader(self, is_leader: bool) -> None:
        """A failover: a new epoch, this node leader or not."""
        self._leader = is_leader
        self._epoch += 1
        for fn in list(self._leadership_listeners):
            fn(is_leader, self._epoch)

    def describe(self) -> Any:  # merge fix (h14node): the Quorum interface gained describe
        from odradek.metadata.quorum import QuorumDescription

        return QuorumDescription(self.leader_id or -1, self._epoch, len(self.log), (), (),
                                 self._leader)

    def records_of(self, cls: type) -> list[Any]:
        return [r for _, r in self.log if isinstance(r, cls)]

    def close(self) -> None:
        pass
