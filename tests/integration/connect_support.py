"""A real `odradek connect serve` process on a free port, and calls to its REST API."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.support.broker import BrokerProcess, free_port

T = TypeVar("T")


class ConnectApi:
    """Calls to a worker's REST API."""

    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return ""

    def call(self, method: str, path: str, body: Any = None,
             raw: bytes | None = None) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                text = resp.read()
                return resp.status, json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, text.decode(errors="replace")

    def answers(self) -> bool:
        with contextlib.suppress(OSError, urllib.error.URLError):
            return self.call("GET", "/")[0] == 200
        return False


class NodeWorker(ConnectApi):
    """The worker an `odradek serve` node runs as its child (`connect.listeners`)."""

    def __init__(self, node: BrokerProcess, port: int) -> None:
        self.node = node
        self.port = port

    def log(self) -> str:
        return self.node.log()

    def pids(self) -> list[int]:
        """The worker children the node started, in order (node_services logs each)."""
        return [int(p) for p in re.findall(r"the Connect worker on \S+ \(pid (\d+)\)",
                                           self.node.log_path.read_text(errors="replace"))]

    def start(self, timeout: float = 120.0) -> NodeWorker:
        wait_for("the node's Connect worker", self.answers, timeout, self.log)
        return self


class ConnectProcess(ConnectApi):
    def __init__(self, bootstrap: str, workdir: Path, extra: list[str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.port = free_port()
        self.workdir = workdir
        self.log_path = workdir / f"connect-{self.port}.log"
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> ConnectProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", "connect", "serve", "-b", self.bootstrap,
             "--listeners", self.url, "--master", "local[1]",
             "--state-dir", str(self.workdir / f"state-{self.port}"), *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"connect exited {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                if self.call("GET", "/")[0] == 200:
                    return self
            time.sleep(0.2)
        pytest.fail(f"connect did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 180.0,
             log: Callable[[], str] = lambda: "") -> T:
    """Poll until `probe` returns something truthy; fail with `what` (and the log) if never."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})\n{log()}")
