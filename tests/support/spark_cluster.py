"""A Spark standalone cluster (one master, one worker) from the pyspark installation, on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyspark

from odradek.spark.session import worker_python
from tests.support.broker import free_port

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


def cluster_env(work: Path) -> dict[str, str]:
    """Environment for the daemons and for drivers that talk to them: loopback, this Python."""
    return {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_DAEMON_MEMORY": "256m",
        # executors' Python workers through odradek's launcher, as odradek's sessions start them
        "PYSPARK_PYTHON": worker_python(),
        "PYSPARK_DRIVER_PYTHON": worker_python(),
    }


class SparkCluster:
    """`spark-class ...Master` and `...Worker`, each a child process with its own log file."""

    def __init__(self, work: Path, cores: int = 2, memory: str = "1g") -> None:
        self.work = Path(work)
        self.cores, self.memory = cores, memory
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.work / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child process
        # A session of its own, so teardown can signal the JVM and nothing else.
        self.procs.append(subprocess.Popen([str(SPARK_CLASS), *args], stdout=log, stderr=subprocess.STDOUT,
                                           env=cluster_env(self.work), start_new_session=True))
        log.close()

    def start(self, timeout: float = 120.0) -> SparkCluster:
        self.work.mkdir(parents=True, exist_ok=True)
        self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)])
        self._spawn("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                               "--webui-port", str(self.worker_ui_port), "--cores", str(self.cores),
                               "--memory", self.memory, self.master_url])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in zip(("master", "worker"), self.procs, strict=True):
                if proc.poll() is not None:
                    raise RuntimeError(f"spark {name} exited with {proc.returncode}:\n{self.log(name)}")
            if self.alive_workers() >= 1:
                return self
            time.sleep(0.5)
        raise TimeoutError(f"no worker registered with {self.master_url}:\n{self.log('worker')}")

    def alive_workers(self) -> int:
        """Workers the master lists as ALIVE, from its JSON status page."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as resp:
                state = json.load(resp)
        except (OSError, ValueError):
            return 0
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def log(self, name: str) -> str:
        try:
            return (self.work / f"{name}.log").read_text(errors="replace")[-10000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the worker, then the master; SIGKILL what does not exit in time."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


@contextlib.contextmanager
def spark_cluster(work: Path, **kwargs: object) -> Iterator[SparkCluster]:
    cluster = SparkCluster(work, **kwargs)  # type: ignore[arg-type]
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
