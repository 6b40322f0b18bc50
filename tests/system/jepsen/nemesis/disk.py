"""Disk faults: a full disk (each node's data directory is a small tmpfs; a ballast file
takes all its free space until the heal deletes it) and fsync/fdatasync returning EIO or
hanging (strace attached to the node with --inject until the heal detaches it).

A node that stops on an I/O error (Kafka halts a broker whose only log dir failed) is started
again at the heal, like any dead node.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis, resolve_target
from tests.system.jepsen.schedule import Fault

__all__ = ["DiskNemesis", "FsyncNemesis", "fill"]

BALLAST = "jepsen-ballast"


def fill(data_dir: Path) -> int:
    """Take every free byte of the file system under `data_dir`; the bytes taken."""
    st = os.statvfs(data_dir)
    free = st.f_bavail * st.f_frsize
    path = data_dir / BALLAST
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        taken = 0
        step = max(free, 4096)
        while step >= 4096:  # tmpfs may keep a few pages back: take what it gives
            try:
                os.posix_fallocate(fd, taken, step)
                taken += step
            except OSError:
                step //= 2
        return taken
    finally:
        os.close(fd)


def _restart_dead(nemesis: Nemesis) -> list[int]:
    started = []
    for node_id, node in nemesis.ctx.cluster.nodes.items():
        if not node.alive():
            nemesis.ctx.cluster.restart(node_id)
            started.append(node_id)
    return started


class DiskNemesis(Nemesis):
    family = "disk"

    def start(self, fault: Fault) -> dict[str, Any]:
        if not self.ctx.cluster.tmpfs_mb:
            raise RuntimeError("the disk family needs the nodes' data dirs on tmpfs")
        node = resolve_target(self.ctx, fault)
        taken = fill(self.ctx.cluster.node(node).data_dir)
        return {"node": node, "ballast_bytes": taken}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        (self.ctx.cluster.node(state["node"]).data_dir / BALLAST).unlink(missing_ok=True)
        return {"node": state["node"], "restarted": _restart_dead(self)}

    def heal_all(self) -> None:
        for node in self.ctx.cluster.nodes.values():
            (node.data_dir / BALLAST).unlink(missing_ok=True)
        _restart_dead(self)


class FsyncNemesis(Nemesis):
    family = "fsync"
    _strace: subprocess.Popen[bytes] | None = None

    def start(self, fault: Fault) -> dict[str, Any]:
        node = resolve_target(self.ctx, fault)
        proc = self.ctx.cluster.node(node).proc
        assert proc is not None
        how = ("error=EIO" if fault.kind == "eio"
               else f"delay_enter={int(fault.params['delay_s'])}s")
        out = self.ctx.workdir / f"strace-{fault.at}.txt"
        self._strace = subprocess.Popen(
            ["strace", "-f", "-qq", "-p", str(proc.pid), "-e", "trace=fsync,fdatasync",
             "-e", f"inject=fsync,fdatasync:{how}", "-o", str(out)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return {"node": node, "inject": how, "strace_pid": self._strace.pid}

    def _detach(self) -> None:
        if self._strace is not None:
            with contextlib.suppress(ProcessLookupError):
                self._strace.send_signal(signal.SIGINT)  # strace detaches on SIGINT
            try:
                self._strace.wait(30)
            except subprocess.TimeoutExpired:
                self._strace.kill()
                self._strace.wait()
            self._strace = None

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self._detach()
        out = self.ctx.workdir / f"strace-{fault.at}.txt"
        text = out.read_text(errors="replace") if out.exists() else ""
        return {"node": state["node"], "injected": text.count("(INJECTED)"),
                "restarted": _restart_dead(self)}

    def heal_all(self) -> None:
        self._detach()
        _restart_dead(self)
