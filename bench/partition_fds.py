"""Partitions against file descriptors (issue 22, point 4): for N partitions with data, the
create time, fds, RSS, full-Metadata time and restart times after SIGTERM and kill -9.

    python -m bench.partition_fds 1000 5000 [--src DIR] [--label NAME]

`--src` runs the node from another source tree (PYTHONPATH), for a before/after table.
Each figure is printed with the 1-minute load average beside it: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

PER_TOPIC = 500


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> float:
    return os.getloadavg()[0]


class Node:
    def __init__(self, data: Path, port: int, src: str | None) -> None:
        self.data, self.port, self.src = data, port, src
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ)
        if self.src:
            env["PYTHONPATH"] = self.src
        log = open(self.data.parent / "node.log", "ab")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(self.data),
             "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--set", "schema.registry.listeners=", "--set", "console.listeners=",
             "--set", f"admin.listeners=http://127.0.0.1:{free_port()}"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def fds(self) -> int:
        assert self.proc is not None
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def rss_mb(self) -> float:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return -1.0

    def stop(self, sig: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(600)


def serving(bootstrap: str, topics: list[str], per_topic: int, timeout: float) -> bool:
    """Every topic's partitions have a leader in a full Metadata answer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            md = admin.list_topics(timeout=30)
        except Exception:
            time.sleep(0.2)
            continue
        if all(t in md.topics and len(md.topics[t].partitions) == per_topic
               and all(p.leader >= 0 for p in md.topics[t].partitions.values())
               for t in topics):
            return True
        time.sleep(0.2)
    return False


def produce_all(bootstrap: str, topics: list[str], per_topic: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    for t in topics:
        for part in range(per_topic):
            for i in range(2):
                p.produce(t, partition=part, value=b"%d" % i + b"x" * 200)
            p.poll(0)
    assert p.flush(300) == 0


def run(n: int, src: str | None, label: str) -> str:
    tmp = Path(tempfile.mkdtemp(prefix="h22fd-bench-"))
    node = Node(tmp / "data", free_port(), src)
    node.start()
    topics = [f"t{i}" for i in range(n // PER_TOPIC)]
    assert serving(node.bootstrap, [], 0, 120)
    l_create = load()
    began = time.monotonic()
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for i, t in enumerate(topics):
        try:
            admin.create_topics([NewTopic(t, PER_TOPIC, 1)], operation_timeout=120)[t].result(120)
        except Exception as exc:  # the fd budget's refusal, or a node that broke
            node.stop()
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
            return (f"| {label} | {n} | refused after {i * PER_TOPIC} partitions "
                    f"({time.monotonic() - began:.1f} s, load {load():.1f}): {exc} | | | | | |")
    assert serving(node.bootstrap, topics, PER_TOPIC, 900)
    create_s = time.monotonic() - began
    produce_all(node.bootstrap, topics, PER_TOPIC)
    # idle active segments give their fds back after two checkpoint rounds (5 s each, longer
    # when a round over thousands of logs is slow): wait until the count holds still
    began = time.monotonic()
    time.sleep(12)
    fds = node.fds()
    while time.monotonic() - began < 90:
        time.sleep(3)
        now = node.fds()
        if now == fds:
            break
        fds = now
    rss, l_fd = node.rss_mb(), load()
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        admin.list_topics(timeout=60)
        times.append(time.monotonic() - t0)
    md_s, l_md = sorted(times)[1], load()
    node.stop()
    l_term = load()
    t0 = time.monotonic()
    node.start()
    assert serving(node.bootstrap, topics, PER_TOPIC, 900)
    term_s = time.monotonic() - t0
    fds_after = node.fds()
    node.stop(signal.SIGKILL)
    l_kill = load()
    t0 = time.monotonic()
    node.start()
    assert serving(node.bootstrap, topics, PER_TOPIC, 900)
    kill_s = time.monotonic() - t0
    node.stop()
    subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return (f"| {label} | {n} | {create_s:.1f} s (load {l_create:.1f}) | {fds} (load {l_fd:.1f})"
            f" / {fds_after} after restart | {rss:.0f} MB | {md_s * 1000:.0f} ms (load {l_md:.1f})"
            f" | {term_s:.1f} s (load {l_term:.1f}) | {kill_s:.1f} s (load {l_kill:.1f}) |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("counts", nargs="+", type=int)
    ap.add_argument("--src")
    ap.add_argument("--label", default="after")
    args = ap.parse_args()
    print("| build | partitions | create | fds (settled after producing) | RSS | full Metadata "
          "| restart after SIGTERM | restart after kill -9 |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.counts:
        print(run(n, args.src, args.label), flush=True)


if __name__ == "__main__":
    main()
