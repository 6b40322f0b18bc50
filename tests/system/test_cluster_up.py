"""Issue 14.1: `odradek cluster up` runs a local cluster of real processes: it prints the
bootstrap string, shows the nodes' state while it runs, serves clients, and Ctrl-C (SIGINT)
stops every node; a second `up` on the same directory starts the same cluster again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.system.cluster_support import wait_until

ODRADEK = [sys.executable, "-m", "odradek.cli.main"]


class Up:
    def __init__(self, data: Path) -> None:
        self.proc = subprocess.Popen(
            [*ODRADEK, "cluster", "up", "--nodes", "3", "--data-dir", str(data),
             "--interval", "0.5", "--set", "offsets.topic.num.partitions=3",
             "--set", "transaction.state.log.num.partitions=3",
             "--set", "broker.heartbeat.interval.ms=500"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        return "\n".join(self.lines)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(120)
        self.reader.join(10)
        return code


@pytest.mark.timeout(400)
def test_cluster_up_serves_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    data = tmp_path / "local"
    up = Up(data)
    try:
        bootstrap = wait_until(
            lambda: next((m.group(1) for line in up.lines
                          if (m := re.match(r"Bootstrap: (\S+)", line))), None),
            f"the bootstrap line:\n{up.text()}", 60)
        assert len(bootstrap.split(",")) == 3
        wait_until(lambda: any("1:unfenced" in x and "2:unfenced" in x and "3:unfenced" in x
                               for x in up.lines), f"3 unfenced nodes:\n{up.text()}", 120)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("up", 3, 3)])["up"].result(60)
    finally:
        code = up.stop()
    assert code == 0, up.text()
    assert "Stopped." in up.text()
    assert all("node stopped" in (data / f"node-{n}.log").read_text() or
               f"node {n} stopped" in (data / f"node-{n}.log").read_text() for n in (1, 2, 3))
    again = Up(data)  # the same cluster, the same ports, its topic still there
    failure = None
    try:
        wait_until(lambda: any("Starting the cluster of" in x for x in again.lines),
                   f"a restart of the same cluster:\n{again.text()}", 60)
        wait_until(lambda: any("1:unfenced" in x and "2:unfenced" in x and "3:unfenced" in x
                               for x in again.lines), f"3 unfenced nodes:\n{again.text()}", 120)
        assert f"Bootstrap: {bootstrap}" in again.lines
        wait_until(lambda: "up" in AdminClient({"bootstrap.servers": bootstrap}).list_topics(
            timeout=5).topics, "topic 'up' after the restart", 120)
    except BaseException as exc:  # reported after the stop, with the command's output
        failure = exc
    code = again.stop()
    if failure is not None:
        raise failure
    assert code == 0, again.text()
