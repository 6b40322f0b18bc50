"""Clock skew per node with libfaketime.

Every node runs with libfaketime preloaded (`node_env`), reading its offset from a file each
time (FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE): the fault writes "+Ns"/"-Ns" to one node's
file and the heal writes "+0". Only the wall clock moves (FAKETIME_DONT_FAKE_MONOTONIC=1):
Python's time.time()/datetime follow it (checked by tests/system/test_jepsen_clock.py), while
time.monotonic(), which asyncio's timers use, does not; so record timestamps, retention and
the `last_caught_up` the quorum reports see the skew, timeouts do not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis, resolve_target
from tests.system.jepsen.schedule import Fault

__all__ = ["LIBFAKETIME", "ClockNemesis", "node_env"]

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"


def offset_file(workdir: Path, node_id: int) -> Path:
    return workdir / f"faketime-{node_id}"


def node_env(workdir: Path, node_id: int) -> dict[str, str]:
    """The environment that puts node `node_id` under libfaketime (offset 0 until skewed)."""
    if not Path(LIBFAKETIME).exists():
        raise RuntimeError(f"{LIBFAKETIME} missing: the Debian package faketime (Makefile "
                           "DEB_PACKAGES) is not installed")
    path = offset_file(workdir, node_id)
    path.write_text("+0\n")
    return {"LD_PRELOAD": LIBFAKETIME, "FAKETIME_TIMESTAMP_FILE": str(path),
            "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


class ClockNemesis(Nemesis):
    family = "clock"

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        skew = int(fault.params["skew_s"])
        offset_file(self.ctx.workdir, node).write_text(f"{skew:+d}s\n")
        return {"node": node, "skew_s": skew}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        offset_file(self.ctx.workdir, state["node"]).write_text("+0\n")
        return {"node": state["node"], "skew_s": 0}

    def heal_all(self) -> None:
        for node_id in self.ctx.cluster.nodes:
            path = offset_file(self.ctx.workdir, node_id)
            if path.exists():
                path.write_text("+0\n")
