"""Clock skew per node: the wall clock of one node moved by seconds to an hour, both ways.

Every node runs with skewclock.so preloaded (`node_env`; built here from skewclock.c with
gcc), reading its offset from an 8-byte file it maps: the fault writes the offset (ns) into
the node's file and the heal writes 0. Only the wall clock moves: Python's time.time() and
datetime follow it (tests/system/test_jepsen_clock.py checks that), time.monotonic(), which
asyncio's timers use, and every sleep do not; so record timestamps, retention, and the
quorum's `last_caught_up` see the skew, timeouts do not. libfaketime was the first choice and
does not work with Python 3.11 here (skewclock.c says why).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis, resolve_target
from tests.system.jepsen.schedule import Fault

__all__ = ["ClockNemesis", "build_skewclock", "node_env", "set_skew"]

SOURCE = Path(__file__).resolve().parent.parent / "skewclock.c"


def build_skewclock(workdir: Path) -> Path:
    """Compile skewclock.c into `workdir` (gcc is in the Makefile's DEB_PACKAGES)."""
    lib = workdir / "skewclock.so"
    if not lib.exists():
        done = subprocess.run(["gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", str(lib),
                               str(SOURCE), "-ldl"], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"building {SOURCE.name} failed: {done.stderr.strip()}")
    return lib


def offset_file(workdir: Path, node_id: int) -> Path:
    return workdir / f"skew-{node_id}"


def set_skew(path: Path, seconds: float) -> None:
    """Write the offset in place (the node has the file mapped: no new file, no rename)."""
    with open(path, "r+b") as f:
        f.write(struct.pack("<q", int(seconds * 1_000_000_000)))


def node_env(workdir: Path, node_id: int) -> dict[str, str]:
    """The environment that puts node `node_id` under skewclock (offset 0 until skewed)."""
    lib = build_skewclock(workdir)
    path = offset_file(workdir, node_id)
    path.write_bytes(struct.pack("<q", 0))
    return {"LD_PRELOAD": str(lib), "ODJ_SKEW_FILE": str(path)}


class ClockNemesis(Nemesis):
    family = "clock"

    def _file(self, node_id: int) -> Path:
        name = self.ctx.cluster.ns_node(node_id).env.get("ODJ_SKEW_FILE")
        if not name:
            raise RuntimeError(f"node {node_id} was not started under skewclock (node_env)")
        return Path(name)

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        skew = int(fault.params["skew_s"])
        set_skew(self._file(node), skew)
        return {"node": node, "skew_s": skew}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        set_skew(self._file(state["node"]), 0)
        return {"node": state["node"], "skew_s": 0}

    def heal_all(self) -> None:
        for node_id in self.ctx.cluster.nodes:
            if self.ctx.cluster.ns_node(node_id).env.get("ODJ_SKEW_FILE"):
                set_skew(self._file(node_id), 0)
