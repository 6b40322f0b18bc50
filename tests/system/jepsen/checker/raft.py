"""Raft invariants of the metadata quorum, read from the nodes' disks after a run.

Each node keeps, under `<data-dir>/__cluster_metadata-0/`:
- the raft log segments (`*.log`): record batches whose partition leader epoch is the raft
  epoch; every epoch a leader won opens with a LeaderChange control batch naming the leader;
- `quorum-state` (JSON: leaderEpoch, votedId, leaderId): the epoch and leader it last knew;
- `quorum-commit`: the highest committed end offset (high watermark) it has seen.

Checked (read-only, so it may run while nodes are up):
- raft-two-leaders: an epoch with two different leaders, across every LeaderChange record
  and every quorum-state file (Raft's election safety);
- raft-log-diverged: two nodes hold different batches (epoch or CRC) at one offset that each
  of them knows committed (below its own commit marker): state machine safety. A node may
  still hold an uncommitted batch of an old epoch where the others committed another (a
  deposed leader stopped before it fetched from the new one): Raft allows that, and the
  node truncates it when it catches up;
- raft-committed-lost: a batch below the highest committed end offset that fewer than a
  majority of the nodes still hold (or cover with a snapshot), or a node whose own commit
  marker lies past what its log holds;
- raft-epoch-regressed: a node's log whose batch epochs go down.

The nodes do not log leadership changes, so a leader that won an epoch and lost it before
writing anything that survived leaves no trace on disk: see `NEEDED_LOG_LINE`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.metadata.quorum import COMMIT_MARKER, METADATA_LOG_DIR, CommitMarker
from odradek.metadata.raft.control import decode_leader_change
from odradek.protocol.records import ControlRecordType, batch_crc_ok, decode_records, iter_batches

from .report import Report

# What the nodes would need to log for the checker to see every leadership, not only those
# that left a LeaderChange batch on some disk. Parsed from node logs when present.
NEEDED_LOG_LINE = "raft: node %d became leader of epoch %d"
_LEADER_LINE = re.compile(r"raft: node (\d+) became leader of epoch (\d+)")
_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


@dataclass
class NodeLog:
    node: int
    # base offset -> (last offset, epoch, crc, crc valid)
    batches: dict[int, tuple[int, int, int, bool]] = field(default_factory=dict)
    leader_changes: list[tuple[int, int, int]] = field(
        default_factory=list
    )  # (offset, epoch, leader)
    state: dict[str, Any] = field(default_factory=dict)
    committed: int | None = None
    snapshot_end: int = 0
    end: int = 0


def read_node(node: int, directory: Path) -> NodeLog:
    d = directory / METADATA_LOG_DIR if (directory / METADATA_LOG_DIR).is_dir() else directory
    out = NodeLog(node)
    for seg in sorted(d.glob("*.log")):
        data = seg.read_bytes()
        for h, batch in iter_batches(data):
            ok = batch_crc_ok(batch)
            out.batches[h.base_offset] = (h.last_offset, h.partition_leader_epoch, h.crc, ok)
            out.end = max(out.end, h.last_offset + 1)
            if ok and h.is_control:
                for rec in decode_records(h, batch):
                    key = bytes(rec.key or b"")
                    if (
                        len(key) >= 4
                        and int.from_bytes(key[2:4], "big") == ControlRecordType.LEADER_CHANGE
                    ):
                        leader, _voters, _granting = decode_leader_change(rec.value or b"")
                        out.leader_changes.append((rec.offset, h.partition_leader_epoch, leader))
    for snap in d.glob("*.checkpoint"):
        m = _SNAPSHOT_NAME.match(snap.name)
        if m:
            out.snapshot_end = max(out.snapshot_end, int(m.group(1)))
    try:
        out.state = json.loads((d / "quorum-state").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        out.state = {}
    try:
        found = CommitMarker.read(d / COMMIT_MARKER)
    except Exception:  # a damaged marker: the node itself refuses to start, reported there
        found = None
    out.committed = found[1] if found is not None else None
    return out


def check_raft(node_dirs: dict[int, Path], node_logs: dict[int, str] | None = None) -> Report:
    """Check the quorum's invariants from each node's data directory (node id -> dir) and,
    when given, the nodes' log text (node id -> text)."""
    nodes = [read_node(n, Path(p)) for n, p in sorted(node_dirs.items())]
    r = Report()
    leaders: dict[int, dict[int, list[str]]] = {}
    for n in nodes:
        for off, epoch, leader in n.leader_changes:
            leaders.setdefault(epoch, {}).setdefault(leader, []).append(f"node {n.node} log @{off}")
        epoch, leader = n.state.get("leaderEpoch"), n.state.get("leaderId")
        if epoch is not None and leader is not None:
            leaders.setdefault(int(epoch), {}).setdefault(int(leader), []).append(
                f"node {n.node} quorum-state"
            )
    seen_in_logs = False
    for node, text in (node_logs or {}).items():
        for m in _LEADER_LINE.finditer(text):
            seen_in_logs = True
            leaders.setdefault(int(m.group(2)), {}).setdefault(int(m.group(1)), []).append(
                f"node {node} log line"
            )
    r.add(
        "raft-two-leaders",
        [{"epoch": e, "leaders": by} for e, by in sorted(leaders.items()) if len(by) > 1],
    )
    if not seen_in_logs:
        r.not_checked["raft-two-leaders (transient)"] = (
            f"nodes do not log leadership; needs the INFO line {NEEDED_LOG_LINE!r}"
        )

    committed = max((n.committed or 0 for n in nodes), default=0)
    diverged = []
    bases = sorted({b for n in nodes for b in n.batches})
    for base in bases:
        held = {n.node: n.batches[base] for n in nodes
                if base in n.batches and base < (n.committed or 0)}
        if base >= committed or len(held) < 2:
            continue
        if len({(v[0], v[1], v[2]) for v in held.values()}) > 1:
            diverged.append(
                {
                    "offset": base,
                    "batches": {
                        str(k): {"last": v[0], "epoch": v[1], "crc": v[2], "crc_ok": v[3]}
                        for k, v in held.items()
                    },
                }
            )
    r.add("raft-log-diverged", diverged)

    majority = len(nodes) // 2 + 1
    lost = []
    for base in bases:
        if base >= committed:
            continue
        holders = [n.node for n in nodes if base in n.batches or base < n.snapshot_end]
        if len(holders) < majority:
            lost.append({"offset": base, "committed_end": committed, "held_by": holders})
    for n in nodes:
        if n.committed is not None and n.committed > max(n.end, n.snapshot_end):
            lost.append({"node": n.node, "committed_end": n.committed, "log_end": n.end})
    r.add("raft-committed-lost", lost)

    regressed = []
    for n in nodes:
        last = -1
        for base in sorted(n.batches):
            epoch = n.batches[base][1]
            if epoch < last:
                regressed.append({"node": n.node, "offset": base, "epoch": epoch, "after": last})
            last = max(last, epoch)
    r.add("raft-epoch-regressed", regressed)
    r.stats = {
        "raft-nodes": len(nodes),
        "raft-committed-end": committed,
        "raft-epochs": len(leaders),
        "raft-log-ends": {str(n.node): n.end for n in nodes},
    }
    return r
