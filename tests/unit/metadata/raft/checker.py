"""Raft's safety invariants, checked on snapshots of the nodes after every simulation step.

- election safety: at most one leader per epoch, over the whole history;
- log matching: an (epoch, offset) names one entry everywhere, and two logs that hold the same
  epoch agree on where it starts and on the epoch before it (so on the whole prefix before it);
- state machine safety: every node's committed prefix (below its high watermark) is a prefix of
  one global committed sequence; no node truncates below its high watermark;
- high watermark: never goes back within a node's life, never beyond its log end;
- leader completeness: a node that becomes leader holds every entry committed so far.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from odradek.metadata.raft.log import Entry, MemoryRaftLog
from odradek.metadata.raft.state import Role


class InvariantViolation(AssertionError):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class ObservedLog(MemoryRaftLog):
    """A MemoryRaftLog that tells the checker what it appended and where it truncated."""

    def __init__(self) -> None:
        super().__init__()
        self.appended: list[Entry] = []
        self.truncations: list[int] = []

    def _push(self, entry: Entry) -> None:
        super()._push(entry)
        self.appended.append(entry)

    def truncate_to(self, offset: int) -> None:
        if offset < len(self.entries):
            self.truncations.append(offset)
        super().truncate_to(offset)


@dataclass
class NodeView:
    node_id: int
    role: Role | None  # None while the node is down
    epoch: int
    high_watermark: int
    log: ObservedLog


@dataclass
class InvariantChecker:
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> node
    committed: list[tuple[int, bytes]] = field(default_factory=list)  # (epoch, payload) by offset
    entries: dict[tuple[int, int], bytes] = field(
        default_factory=dict
    )  # (epoch, offset) -> payload
    last_hw: dict[int, int] = field(default_factory=dict)
    checked_hw: dict[int, int] = field(default_factory=dict)
    steps: int = 0
    _new_leaders: set[int] = field(default_factory=set)

    def restarted(self, node_id: int) -> None:
        """A node came back: its high watermark is volatile and starts again from 0."""
        self.last_hw[node_id] = 0
        self.checked_hw[node_id] = 0

    def check(self, views: list[NodeView]) -> None:
        self.steps += 1
        for v in views:  # election safety first: the other breaches follow from a double leader
            if v.role is Role.LEADER:
                self._check_leader(v)
        changed = []
        for v in views:
            log = v.log
            if log.appended or log.truncations:
                changed.append(v)
            for off in log.truncations:
                if off < self.last_hw.get(v.node_id, 0):
                    raise InvariantViolation(
                        "committed-truncated",
                        f"node {v.node_id} truncated to {off} below its high watermark "
                        f"{self.last_hw[v.node_id]}",
                    )
            log.truncations.clear()
            for e in log.appended:
                seen = self.entries.setdefault((e.epoch, e.offset), e.payload)
                if seen != e.payload:
                    raise InvariantViolation(
                        "log-matching",
                        f"node {v.node_id}: two entries at offset {e.offset} in epoch {e.epoch}",
                    )
            log.appended.clear()
        for v in changed:
            mine = dict(_epoch_chain(v.log))
            for other in views:
                if other is v:
                    continue
                theirs = dict(_epoch_chain(other.log))
                for epoch, (start, prev) in mine.items():
                    if epoch in theirs and theirs[epoch] != (start, prev):
                        raise InvariantViolation(
                            "log-matching",
                            f"epoch {epoch} starts at {start} after {prev} on node {v.node_id} "
                            f"but at {theirs[epoch]} on node {other.node_id}",
                        )
        for v in views:
            if v.role is None:
                continue
            self._check_hw(v)
            if v.role is Role.LEADER:
                self._check_completeness(v)

    def _check_hw(self, v: NodeView) -> None:
        hw, last = v.high_watermark, self.last_hw.get(v.node_id, 0)
        if hw < last:
            raise InvariantViolation("hw-backward", f"node {v.node_id}: {last} -> {hw}")
        if hw > v.log.end_offset():
            raise InvariantViolation(
                "hw-beyond-log", f"node {v.node_id}: hw {hw} > end {v.log.end_offset()}"
            )
        self.last_hw[v.node_id] = hw
        start = self.checked_hw.get(v.node_id, 0)
        for off in range(start, hw):
            e = v.log.entries[off]
            if off < len(self.committed):
                if self.committed[off] != (e.epoch, e.payload):
                    raise InvariantViolation(
                        "committed-changed",
                        f"node {v.node_id} commits {(e.epoch, e.payload)!r} at {off}, "
                        f"already committed as {self.committed[off]!r}",
                    )
            else:
                self.committed.append((e.epoch, e.payload))
        self.checked_hw[v.node_id] = max(start, hw)

    def _check_leader(self, v: NodeView) -> None:
        holder = self.leaders.get(v.epoch)
        if holder is not None:
            if holder != v.node_id:
                raise InvariantViolation(
                    "election-safety", f"epoch {v.epoch} has leaders {holder} and {v.node_id}"
                )
            return
        self.leaders[v.epoch] = v.node_id
        self._new_leaders.add(v.epoch)

    def _check_completeness(self, v: NodeView) -> None:
        if v.epoch not in self._new_leaders:
            return
        self._new_leaders.discard(v.epoch)
        # checked when the leader is first seen: a deposed leader that still thinks it leads
        # need not hold what its successors commit later
        n = len(self.committed)
        if n and (
            v.log.end_offset() < n
            or (v.log.entries[n - 1].epoch, v.log.entries[n - 1].payload) != self.committed[-1]
        ):
            raise InvariantViolation(
                "leader-completeness",
                f"node {v.node_id} leads epoch {v.epoch} without the committed prefix of {n}",
            )


def _epoch_chain(log: MemoryRaftLog) -> list[tuple[int, tuple[int, int]]]:
    """epoch -> (start offset, previous epoch) for each epoch in the log."""
    starts = log.epoch_starts()
    return [(e, (s, starts[i - 1][0] if i else -1)) for i, (e, s) in enumerate(starts)]
