"""The soak of issue 22 (point 5): one node for an hour at a steady produce rate, its memory,
fds and CPU sampled every 30 s.

    python -m bench.soak --out soak-out [--minutes 60] [--rate 20000] [--size 1024]
                         [--partitions 6] [--consumers 1] [--src DIR]

One topic with retention by size (`retention.bytes` per partition, small segments, the
retention check every 10 s), so the disk holds a few GB however long it runs. A producer
process (confluent-kafka, acks=all, linger.ms=5) sends `rate` records of `size` bytes a
second, paced in 10 ms steps; a consumer process reads them back in a group (the fetch path
is part of the steady state). Every 30 s one JSON line goes to `<out>/samples.jsonl`: minute,
node RSS (anonymous and file-backed apart, from /proc/PID/status), fds, node CPU seconds
in the interval, records produced and consumed so far, bytes on disk, 1-minute load average.
`<out>/summary.md` gets the compact table (minute, RSS) at the end.

`--src` runs the node from another source tree (PYTHONPATH), for a before/after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

TOPIC = "soak"
SAMPLE_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM", "Threads"):
            out[key] = int(rest.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def disk_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def producer_main(bootstrap: str, rate: int, size: int, seconds: float, counter) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
    payload = os.urandom(size)
    done = [0, 0]

    def on_delivery(err, _msg) -> None:
        done[1 if err else 0] += 1

    step = 0.01
    per_step = rate * step
    began = time.monotonic()
    sent = 0.0
    owed = 0.0
    while time.monotonic() - began < seconds:
        owed += per_step
        n = int(owed)
        owed -= n
        for _ in range(n):
            while True:
                try:
                    p.produce(TOPIC, payload, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
        sent += n
        p.poll(0)
        counter[0], counter[1] = done
        # pace against the start, not the last step: a late step is made up
        target = began + (sent / rate)
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    p.flush(60)
    counter[0], counter[1] = done


def consumer_main(bootstrap: str, seconds: float, counter) -> None:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak",
                  "auto.offset.reset": "latest", "enable.auto.commit": True,
                  "fetch.queue.backoff.ms": 5})
    c.subscribe([TOPIC])
    began = time.monotonic()
    n = 0
    while time.monotonic() - began < seconds:
        for m in c.consume(10000, 0.5):
            if m.error() is None:
                n += 1
        counter[2] = n
    c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("soak-out"))
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--consumers", type=int, default=1)
    ap.add_argument("--retention-bytes", type=int, default=256 << 20)
    ap.add_argument("--segment-bytes", type=int, default=64 << 20)
    ap.add_argument("--src")
    ap.add_argument("--node-arg", action="append", default=[],
                    help="extra --set key=value for the node")
    args = ap.parse_args()

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    data = out / "data"
    shutil.rmtree(data, ignore_errors=True)
    port = free_port()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    cmd = [sys.executable, "-m", "odradek.cli.main", "serve", "--data-dir", str(data),
           "--set", f"listeners=PLAINTEXT://127.0.0.1:{port}",
           # its own admin HTTP port: parallel runs must not share the default 9644
           "--set", f"admin.listeners=http://127.0.0.1:{free_port()}",
           "--set", "log.retention.check.interval.ms=10000",
           "--set", "auto.create.topics.enable=false", "--set", "schema.registry.listeners=",
           "--set", "console.listeners="]
    for kv in args.node_arg:
        cmd += ["--set", kv]
    with open(out / "node.log", "wb") as node_log:
        node = subprocess.Popen(cmd, stdout=node_log, stderr=subprocess.STDOUT, env=env)
    bootstrap = f"127.0.0.1:{port}"

    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        try:
            admin.list_topics(timeout=5)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    topic_cfg = {"retention.bytes": str(args.retention_bytes),
                 "segment.bytes": str(args.segment_bytes)}
    admin.create_topics([NewTopic(TOPIC, args.partitions, 1, config=topic_cfg)])[TOPIC].result(60)

    seconds = args.minutes * 60
    counter = mp.Array("q", 3)  # produced ok, produce errors, consumed
    procs = [mp.Process(target=producer_main,
                        args=(bootstrap, args.rate, args.size, seconds, counter))]
    procs += [mp.Process(target=consumer_main, args=(bootstrap, seconds, counter))
              for _ in range(min(args.consumers, 1))]
    for p in procs:
        p.start()

    samples = open(out / "samples.jsonl", "w")  # noqa: SIM115 - written to the end
    began = time.monotonic()
    last_cpu = cpu_seconds(node.pid)
    rows: list[tuple[float, float]] = []
    try:
        while True:
            time.sleep(max(0.0, began + (len(rows) + 1) * SAMPLE_S - time.monotonic()))
            elapsed = time.monotonic() - began
            if node.poll() is not None:
                print(f"node exited with {node.returncode}", file=sys.stderr)
                break
            st = proc_status(node.pid)
            cpu = cpu_seconds(node.pid)
            row = {
                "minute": round(elapsed / 60, 2),
                "rss_mb": round(st["VmRSS"] / 1024, 1),
                "anon_mb": round(st.get("RssAnon", 0) / 1024, 1),
                "file_mb": round(st.get("RssFile", 0) / 1024, 1),
                "hwm_mb": round(st["VmHWM"] / 1024, 1),
                "threads": st.get("Threads", 0),
                "fds": len(os.listdir(f"/proc/{node.pid}/fd")),
                "cpu_s": round(cpu - last_cpu, 2),
                "produced": counter[0],
                "produce_errors": counter[1],
                "consumed": counter[2],
                "disk_mb": round(disk_bytes(data) / 2**20),
                "load": round(os.getloadavg()[0], 2),
            }
            last_cpu = cpu
            rows.append((row["minute"], row["rss_mb"]))
            samples.write(json.dumps(row) + "\n")
            samples.flush()
            if elapsed >= seconds and not any(p.is_alive() for p in procs):
                break
            if elapsed >= seconds + 120:
                break
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.terminate()
        node.send_signal(signal.SIGTERM)
        try:
            node.wait(120)
        except subprocess.TimeoutExpired:
            node.kill()
        samples.close()
    with open(out / "summary.md", "w") as f:
        f.write("| minute | RSS MB |\n|---|---|\n")
        for minute, rss in rows:
            f.write(f"| {minute:.1f} | {rss:.1f} |\n")
    shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
