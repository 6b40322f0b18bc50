"""Restart time of one node after SIGTERM and after kill -9, against data size and batch count.

    python -m bench.restart_time [--before SRC] [--sizes-mb 2048] [--batch-mb 1024] [--tail-mb 64]

Each case builds a data directory with one topic `bench` (one partition, default 1 GiB
segments): the bulk is appended straight through `odradek.storage.log.Log` by the code under
test (as the node would have written it, closed cleanly, checkpoints set to its end), then a
real node appends a tail of `--tail-mb` through a confluent-kafka producer and is killed
with SIGKILL. Timed: the start after that kill (recovery point = the bulk's end), then a
SIGTERM and the start after it. A start is timed from spawn to the port accepting; beside
it, the node's own "logs loaded in X s" (the partition logs' open, recovery included).

`--before SRC` names another `src/` directory (e.g. main's, from `git archive main src`); each
case then runs before and after in turn, each with its own data directory, so both see the
same machine load. The machine's load average is printed beside each figure. The page cache
is left warm (it is shared with other users of the machine): the figures are what start-up
computes and reads from memory, not cold-disk times.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1024 * 1024
TOPIC = "bench"
HERE = Path(__file__).resolve().parent.parent

_GEN = r"""
import sys, time
from pathlib import Path
from odradek.protocol.records import BatchHeader, Record, build_batch
from odradek.storage.checkpoints import (LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT, read_offsets, write_offsets)
from odradek.storage.config import LogConfig
from odradek.storage.log import Log
data, total, batch_bytes = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
records = max(1, batch_bytes // 10_000)
value = b"x" * max(1, batch_bytes // records - 80)
now = int(time.time() * 1000)
raw = build_batch([Record(-1, now, b"k%d" % i, value, []) for i in range(records)])
view = memoryview(raw)
header = BatchHeader.parse(view)
log = Log.open(data / "bench-0", LogConfig())
written = 0
while written < total:
    log.append(view, header, 0)
    written += len(raw)
leo = log.log_end_offset
log.close()
for name, value_ in ((RECOVERY_POINT_CHECKPOINT, leo), (LOG_START_OFFSET_CHECKPOINT, 0)):
    offsets = read_offsets(data / name)
    offsets[("bench", 0)] = value_
    write_offsets(data / name, offsets)
print(leo, len(raw))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


class Node:
    def __init__(self, src: Path, data: Path) -> None:
        self.src, self.data, self.port = src, data, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"{data.name}.log"

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(self.src), "PYTHONUNBUFFERED": "1"}

    def start(self) -> float:
        began = time.monotonic()
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(self.data),
                 "--set", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                 "--set", f"admin.listeners=http://127.0.0.1:{free_port()}",
                 "--set", "log.flush.offset.checkpoint.interval.ms=3600000",
                 "--set", "schema.registry.listeners=", "--set", "console.listeners="],
                stdout=out, stderr=subprocess.STDOUT, env=self.env())
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node exited: {self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.port), 0.2):
                return time.monotonic() - began
            time.sleep(0.02)

    def loaded_in(self) -> str:
        """The node's own "logs loaded in X s" line of its last start."""
        found = re.findall(r"logs loaded in ([0-9.]+) s", self.log.read_text(errors="replace"))
        return f"{found[-1]} s" if found else "?"

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(600)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def produce_tail(bootstrap: str, mb: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20,
                  "batch.size": 1_000_000, "enable.idempotence": False})
    value = b"t" * 10_000
    for _ in range(mb * MB // len(value)):
        while True:
            try:
                p.produce(TOPIC, value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        t = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
        if t is not None and t.error is None and t.partitions and t.partitions[0].leader >= 0:
            return
        time.sleep(0.1)


def evict_caches(data: Path) -> str:
    """Make the next start read from disk: drop the whole page cache when this process may
    (root: `echo 3 > /proc/sys/vm/drop_caches`, after a sync), else evict the data
    directory's files (posix_fadvise DONTNEED on each, after an fsync). Returns which."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return "drop_caches"
    except OSError:
        pass
    for dirpath, _, files in os.walk(data):
        for name in files:
            path = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
    return "fadvise"


def one_case(src: Path, root: Path, bulk_mb: int, batch_bytes: int, tail_mb: int,
             cold: bool = False) -> dict[str, str]:
    data = root / "data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    node = Node(src, data)
    node.start()
    create_topic(node.bootstrap)
    node.stop()
    gen = subprocess.run([sys.executable, "-c", _GEN, str(data), str(bulk_mb * MB), str(batch_bytes)],
                         env=node.env(), capture_output=True, text=True, check=True)
    leo, size = gen.stdout.split()
    node.start()  # untimed: the bulk was closed cleanly
    produce_tail(node.bootstrap, tail_mb)
    node.kill9()
    kill_load = load()
    t_kill = node.start()
    kill_logs = node.loaded_in()
    out = {"records": leo, "batch": size,
           "kill9": f"{t_kill:.2f} s, logs {kill_logs} ({kill_load})"}
    if cold:
        # a second crash with the same tail past the recovery point, then a cold start
        produce_tail(node.bootstrap, tail_mb)
        node.kill9()
        how = evict_caches(data)
        cold_load = load()
        t = node.start()
        out["kill9_cold"] = f"{t:.2f} s, logs {node.loaded_in()} ({cold_load}, {how})"
    node.stop()
    clean_load = load()
    t_clean = node.start()
    clean_logs = node.loaded_in()
    out["sigterm"] = f"{t_clean:.2f} s, logs {clean_logs} ({clean_load})"
    node.stop()
    if cold:
        how = evict_caches(data)
        cold_load = load()
        t = node.start()
        out["sigterm_cold"] = f"{t:.2f} s, logs {node.loaded_in()} ({cold_load}, {how})"
        node.stop()
    shutil.rmtree(data, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="src/ of the code to compare against")
    ap.add_argument("--sizes-mb", type=int, nargs="*", default=[2048])
    ap.add_argument("--batch-mb", type=int, default=1024, help="bytes of the batch-count cases (0: none)")
    ap.add_argument("--tail-mb", type=int, default=64)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--small-batch-mb", type=int, nargs="*", default=[],
                    help="extra cases of this many MB in ~1 KB batches (batch count)")
    ap.add_argument("--cold", action="store_true",
                    help="also time each start with the page cache dropped (see evict_caches)")
    ap.add_argument("--after", type=Path, help="src/ of the code under test (default: this tree)")
    args = ap.parse_args()
    variants = [("after", (args.after or HERE / "src").resolve())]
    if args.before is not None:
        variants.insert(0, ("before", args.before.resolve()))
    cases = [(f"{mb} MB in ~1 MB batches", mb, 1_000_000) for mb in args.sizes_mb]
    if args.batch_mb > 0:
        cases += [(f"{args.batch_mb} MB in ~1 MB batches", args.batch_mb, 1_000_000),
                  (f"{args.batch_mb} MB in ~1 KB batches", args.batch_mb, 1_000)]
    cases += [(f"{mb} MB in ~1 KB batches", mb, 1_000) for mb in args.small_batch_mb]
    root = Path(tempfile.mkdtemp(prefix="restart-", dir=args.dir))
    try:
        cold_cols = " kill -9 restart, cold | SIGTERM restart, cold |" if args.cold else ""
        print(f"| data | code | batch bytes | kill -9 restart (tail {args.tail_mb} MB) | "
              f"SIGTERM restart |{cold_cols}")
        print("|---|---|---|---|---|" + ("---|---|" if args.cold else ""))
        for name, mb, batch in cases:
            for label, src in variants:
                r = one_case(src, root / label, mb, batch, args.tail_mb, args.cold)
                cold = (f" {r['kill9_cold']} | {r['sigterm_cold']} |" if args.cold else "")
                print(f"| {name} | {label} | {r['batch']} | {r['kill9']} | {r['sigterm']} |"
                      f"{cold}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
