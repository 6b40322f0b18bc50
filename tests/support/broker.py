"""Start and stop real `odradek serve` processes on loopback for tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from odradek.broker.local_cluster import free_port as cluster_free_port

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


_GIVEN: set[int] = set()
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            next(f, None)  # the header
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == _LISTEN and int(local.rsplit(":", 1)[1], 16) == port:
                    inodes.add(inode)
    return inodes


def listens(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on `port`."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(f"{fd_dir}/{fd}")
            if target.startswith("socket:[") and target[8:-1] in inodes:
                return True
    return False


def _lane() -> tuple[int, int]:
    """(this xdist worker's index, the number of workers): each worker draws ports from its
    own residue class, so two workers never hand out the same port (a port drawn is free
    only until its node binds it, seconds later)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if worker.startswith("gw") and worker[2:].isdigit() and count > 1:
        return int(worker[2:]) % count, count
    return 0, 1


def free_port() -> int:
    """A port free now, outside the ephemeral range (`local_cluster.free_port`), never
    handed out before in this process, and in this worker's lane (`_lane`). conftest makes
    it local_cluster's too, so clusters the tests start draw the same way."""
    index, count = _lane()
    while True:
        port = cluster_free_port()
        if port % count == index and port not in _GIVEN:
            _GIVEN.add(port)
            return port


class BrokerProcess:
    """One `odradek serve` node: a real process with its own data dir and port."""

    def __init__(self, data_dir: Path, port: int | None = None, settings: dict[str, str] | None = None,
                 log_path: Path | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.settings = dict(settings or {})
        # each node its own admin HTTP port (admin.listeners), so parallel nodes never collide
        self.admin_port = free_port()
        self.log_path = log_path or (self.data_dir.parent / f"{self.data_dir.name}-node.log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.admin_port}"

    def command(self) -> list[str]:
        cmd = [*ODRADEK, "serve", "--data-dir", str(self.data_dir),
               "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
               "--set", "schema.registry.listeners=",  # tests run many nodes at once
               "--set", "console.listeners=",
               "--set", f"admin.listeners={self.admin_url}"]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def listener_ports(self) -> list[int]:
        """The ports of the node's `listeners` (its own setting, or the one the tests give)."""
        value = self.settings.get("listeners", f"PLAINTEXT://127.0.0.1:{self.port}")
        ports = [int(lst.rsplit(":", 1)[1]) for lst in value.split(",") if lst.strip()]
        return [port for port in ports if port > 0]

    def start(self, timeout: float = 120.0) -> BrokerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"odradek exited with {self.proc.returncode}:\n{self.log()}")
            # up means every listener listens, and as this process's: the node starts its
            # listeners one after the other (building a TLS listener's context takes tens of
            # ms), and the kernel accepts on the first meanwhile, so a test that waited only
            # for it was refused on another (CI of stops 32 and session 16's check); and a
            # port drawn at random may briefly be another test's
            ports = self.listener_ports()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.2):
                if all(listens(self.proc.pid, port) for port in ports):
                    return self
            time.sleep(0.05)
        raise TimeoutError(f"odradek did not listen on {self.port}:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-20000:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def kill9(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond the page cache."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def restart(self) -> BrokerProcess:
        self.stop()
        return self.start()


@contextlib.contextmanager
def running_broker(data_dir: Path, **kwargs: object) -> Iterator[BrokerProcess]:
    node = BrokerProcess(data_dir, **kwargs)  # type: ignore[arg-type]
    node.start()
    try:
        yield node
    finally:
        if node.alive():
            node.stop()
