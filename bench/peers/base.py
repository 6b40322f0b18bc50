"""What every system in the comparison shares: Debian installs, a server process on loopback,
and the shape of a client module.

A system is an object with `name`, `start(workdir)`, `stop()`, `endpoint` (what its client
functions connect to), `cpu_seconds()` (the server's CPU so far) and `create(stream,
partitions)`. Its `client` names a module whose functions run in child processes (so clients
never share a GIL with each other or with the harness):

    produce(endpoint, stream, partitions, size, max_records, max_seconds) -> Phase
    consume(endpoint, stream, partitions, size, expected, total, ready, go, timeout_s) -> Phase
    e2e_produce(endpoint, stream, partitions, size, rate, seconds, warmup_s) -> (sent, seconds)
    e2e_consume(endpoint, stream, partitions, expected, timeout_s, ready) -> (count, latencies)

`total` and `expected` are shared integers, -1 until the producer knows its count; `ready`
and `go` are events: the consumer sets `ready` once connected and starts timing on `go`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

_APT_UPDATED = False


@dataclass
class Phase:
    """What one client did: records, record bytes, and the seconds it took."""

    records: int
    bytes: int
    seconds: float

    @property
    def records_per_sec(self) -> float:
        return self.records / max(self.seconds, 1e-9)

    @property
    def mb_per_sec(self) -> float:
        return self.bytes / max(self.seconds, 1e-9) / (1024 * 1024)


def ensure_debs(packages: list[str], binary: str | None = None) -> None:
    """Install the Debian packages that are missing (apt-get update once per run)."""
    global _APT_UPDATED
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if binary is not None and shutil.which(binary) is None and not missing:
        missing = list(packages)
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    print(f"installing Debian packages: {' '.join(missing)}", flush=True)
    if not _APT_UPDATED:
        subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, env=env)
        _APT_UPDATED = True
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", *missing], check=True, env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes] | None, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listened on port {port} within {timeout}s:\n{tail(log)}")


def tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class ServerProcess:
    """A server started by the harness: its log, its CPU seconds, a clean stop."""

    def __init__(self, cmd: list[str], log: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.cmd = cmd
        self.log = log
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self._ps: psutil.Process | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            # Own session: stop() signals the server's whole process group and nothing else.
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.cwd, start_new_session=True)
        self._ps = psutil.Process(self.proc.pid)

    def cpu_seconds(self) -> float:
        """CPU of the server and of every process it started (RabbitMQ runs beam.smp under a
        shell script)."""
        if self._ps is None:
            return 0.0
        total = 0.0
        procs = [self._ps]
        with contextlib.suppress(psutil.Error):
            procs += self._ps.children(recursive=True)
        for p in procs:
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        pgid = os.getpgid(self.proc.pid)
        os.killpg(pgid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            self.proc.wait()
        # Children that outlive the script (beam under rabbitmq-server) go with the group.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                os.killpg(pgid, 0)
                time.sleep(0.1)
            os.killpg(pgid, signal.SIGKILL)
