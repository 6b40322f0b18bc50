"""Process faults: kill -9 / SIGTERM bounces, SIGSTOP pauses, and a crash losing the tail of
the partition logs that was never fsynced.

Why truncation emulates a lost page cache: a kill -9 keeps the page cache, so the files are
whole after it. This kernel has no device-mapper (dm-flakey, dm-log-writes) to drop unflushed
writes, so after the kill we cut the last `tail_bytes` off the active segment of every
partition log of that node; the nodes fsync partition data only on roll (flush.messages off,
Kafka's default), so that tail is what a power loss may take. The `__cluster_metadata` log
is left whole: the Raft log is fsynced before a record counts as written.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis, resolve_target
from tests.system.jepsen.schedule import Fault

__all__ = ["CrashNemesis", "KillNemesis", "PauseNemesis", "truncate_tails"]


class KillNemesis(Nemesis):
    family = "kill"

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        cluster = self.ctx.cluster
        if fault.kind == "kill9":
            cluster.kill9(node)
            return {"node": node, "signal": "SIGKILL"}
        cluster.expected_down.add(node)
        cluster.node(node).signal(signal.SIGTERM)  # no wait: its controlled shutdown runs on
        return {"node": node, "signal": "SIGTERM"}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        node = self.ctx.cluster.node(state["node"])
        if node.alive():  # a SIGTERM shutdown still running: it is given up on
            node.kill9()
        self.ctx.cluster.restart(state["node"])
        return {"node": state["node"], "restarted": True}

    def heal_all(self) -> None:
        for node_id, node in self.ctx.cluster.nodes.items():
            if not node.alive():
                self.ctx.cluster.restart(node_id)


class PauseNemesis(Nemesis):
    family = "pause"

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        self.ctx.cluster.pause(node)
        return {"node": node, "signal": "SIGSTOP"}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self.ctx.cluster.resume(state["node"])
        return {"node": state["node"], "signal": "SIGCONT"}

    def heal_all(self) -> None:
        for node_id, node in self.ctx.cluster.nodes.items():
            if node.paused:
                self.ctx.cluster.resume(node_id)


def truncate_tails(data_dir: Path, tail_bytes: int) -> dict[str, int]:
    """Cut up to `tail_bytes` off the newest segment of each partition log; path -> bytes cut."""
    cut: dict[str, int] = {}
    for part in sorted(p for p in data_dir.iterdir() if p.is_dir()):
        if part.name.startswith("__cluster_metadata"):
            continue
        segments = sorted(part.glob("*.log"))
        if not segments:
            continue
        active = segments[-1]
        size = active.stat().st_size
        n = min(size, tail_bytes)
        if n:
            os.truncate(active, size - n)
            cut[f"{part.name}/{active.name}"] = n
    return cut


class CrashNemesis(Nemesis):
    family = "crash"

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        self.ctx.cluster.kill9(node)
        cut = truncate_tails(self.ctx.cluster.node(node).data_dir, fault.params["tail_bytes"])
        return {"node": node, "signal": "SIGKILL", "truncated": cut}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self.ctx.cluster.restart(state["node"])
        return {"node": state["node"], "restarted": True}

    def heal_all(self) -> None:
        for node_id, node in self.ctx.cluster.nodes.items():
            if not node.alive():
                self.ctx.cluster.restart(node_id)
