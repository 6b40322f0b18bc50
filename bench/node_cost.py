"""The node's CPU per request, from a raw-socket client that sends fixed requests.

    python -m bench.node_cost [--requests 20000] [--records-per-batch 1,1000,10000]
                              [--record-size 100] [--partitions 6] [--fetch-bytes 1000,20000]
                              [--set key=value ...] [--ab ROUNDS] [--profile DIR]

A confluent-kafka client shapes its requests by timing (linger, how fast it runs), so the
node's CPU per GB it reports moves with the machine's load. Here every request is the same:
Produce v7 (acks=1) of one batch of N records of --record-size bytes for each of --partitions
partitions (as a client's request to one broker carries a batch per partition), or Fetch v11 of a fixed byte range,
pipelined 16 deep from one connection whose client does nothing but count responses. The node's
CPU seconds (psutil) per request and per GB are then a property of the node alone, good for
comparing two versions of the node on a busy machine. The node runs with message.max.bytes
raised so that 10k-record batches of 1 KB (a columnar producer's) are accepted.

`--ab ROUNDS` is issue 18's metrics A/B: two nodes at once, one measuring requests (the
default admin.listeners, request.slow.log.ms=10000) and one not (`admin.listeners=`,
`request.slow.log.ms=-1`: the servers time nothing), measured in turns (the first of each
round alternates), so a change of the machine's load falls on both; Produce, Fetch and
Metadata v9 (of the topic, as a client's refresh) requests. With --profile, the share of
py-spy's samples in the metrics code is printed too (only what runs outside the server's
inline timing: the slow path and the scrape).

`--instructions` is the same A/B counted in instructions, which the machine's load does not
move: each node runs under `valgrind --tool=callgrind` (started one after the other, measured
at once), and for each kind of request its counters are zeroed (`callgrind_control -z`),
--requests requests sent, and the counters dumped (`callgrind_control -d`): the whole
process's instructions over those requests, its event loop's idle work, the admin HTTP
server's ticks, garbage collection and every thread included. The node's instructions per
second while idle are measured the same way (--idle-seconds) and printed apart, and
subtracted from the requests' (a request takes ~50x its time under valgrind, so the idle
work falls on it ~50x; the idle figure is the per-second cost a real node pays). Under
valgrind every request is past the histograms' first bucket (0.1 ms), so the metrics' figure
is that of the path with one bisect, not the cheapest one. PYTHONHASHSEED=0.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from kio.schema.fetch.v11 import request as f11
from kio.schema.produce.v7 import request as p7
from kio.static.primitive import i8, i16, i32, i64
from tests.support import requests as rq
from tests.support import wire
from tests.support.broker import BrokerProcess

from bench.run import Profiler
from odradek.client.admin import ensure_topic

WINDOW = 16
GB = 1e9
MAX_BATCH_BYTES = 64 * 1024 * 1024


def _cpu(ps: psutil.Process) -> tuple[float, float]:
    t = ps.cpu_times()
    return t.user, t.system


def pipelined(port: int, frames: list[bytes], count: int) -> None:
    """Send `count` requests (cycling through `frames`) WINDOW deep; wait for every response."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        sent = received = 0
        while received < count:
            while sent < count and sent - received < WINDOW:
                sock.sendall(frames[sent % len(frames)])
                sent += 1
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("the node closed the connection")
            buf += chunk
            pos = 0
            while len(buf) - pos >= 4:
                size = struct.unpack_from(">i", buf, pos)[0]
                if len(buf) - pos - 4 < size:
                    break
                pos += 4 + size
                received += 1
            del buf[:pos]


def produce_frames(topic: str, records: int, size: int, partitions: int = 1) -> list[bytes]:
    now = int(time.time() * 1000)
    batch = wire.build_batch_v2([wire.Rec(None, b"x" * size, [], now)] * records)
    req = p7.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=rq.TIMEOUT,
        topic_data=(p7.TopicProduceData(name=topic, partition_data=tuple(
            p7.PartitionProduceData(index=i32(p), records=batch) for p in range(partitions))),))
    return [wire.frame(wire.request_payload(req, cid)) for cid in range(1, WINDOW + 1)]


def fetch_frames(topic: str, max_bytes: int) -> list[bytes]:
    req = f11.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(f11.FetchTopic(topic=topic, partitions=(f11.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
            log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes)),)),))
    return [wire.frame(wire.request_payload(req, cid)) for cid in range(1, WINDOW + 1)]


def metadata_frames(topic: str) -> list[bytes]:
    return [wire.frame(wire.request_payload(rq.metadata_v9([topic], auto_create=False), cid))
            for cid in range(1, WINDOW + 1)]


def measure(ps: psutil.Process, port: int, frames: list[bytes], count: int,
            profile: Path | None = None) -> tuple[float, float]:
    """The node's (user, system) CPU seconds for `count` requests."""
    pipelined(port, frames, min(count, 20))  # warm up: imports, caches
    profiler = Profiler(profile.parent if profile else None, ps.pid)
    if profile is not None:
        profiler.start(profile.name)
    user, system = _cpu(ps)
    pipelined(port, frames, count)
    user2, system2 = _cpu(ps)
    if profile is not None:
        print(f"# node's busiest frames (py-spy, GIL holders)\n{profiler.stop()}")
    return user2 - user, system2 - system


# where the metrics' work runs outside Connection._dispatch's inline timing (which py-spy
# cannot tell from the rest of _dispatch): past the first bucket, later answers, scrapes
METRICS_FRAMES = ("odradek/broker/metrics/",)


def metrics_share(raw: Path) -> tuple[int, int]:
    """(samples in the metrics code, samples in all) of a py-spy raw file: samples whose
    innermost frame is a metrics frame, idle waits left out. A sample on the closure's call
    of the Dispatcher is counted too (its share of the call is what the metrics add)."""
    total = ours = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        leaf = stack.rsplit(";", 1)[-1]
        if any(idle in leaf for idle in ("select (selectors", "wait (threading", "_worker (")):
            continue
        total += int(count)
        if any(f in leaf for f in METRICS_FRAMES):
            ours += int(count)
    return ours, total


KINDS = ("produce", "fetch", "metadata")
ON = {"request.slow.log.ms": "10000"}
OFF = {"admin.listeners": "", "request.slow.log.ms": "-1"}


def ab(args: argparse.Namespace, settings: dict[str, str]) -> None:
    """Metrics on vs off, interleaved rounds on two nodes running at once. With --sides on,on
    (or off,off) both nodes run the same settings: the control, whose gap is the
    per-process spread of two processes of one code (hash seed, memory layout)."""
    a, b = args.sides.split(",")
    sides = {"on": ON, "off": OFF}
    n = int(args.records_per_batch.split(",")[0])
    fetch_bytes = int(args.fetch_bytes.split(",")[0])
    with tempfile.TemporaryDirectory(prefix="odradek-ab-") as tmp:
        nodes = {name: BrokerProcess(Path(tmp) / name, settings={**settings, **extra})
                 for name, extra in (("on", sides[a]), ("off", sides[b]))}
        for node in nodes.values():
            node.start(timeout=120)
        try:
            frames = {}
            for name, node in nodes.items():
                ensure_topic(node.bootstrap, "cost", args.partitions)
                frames[name] = (produce_frames("cost", n, args.record_size, args.partitions),
                                fetch_frames("cost", fetch_bytes), metadata_frames("cost"))
                pipelined(node.port, frames[name][0], 200)  # records for the fetches
            rows: dict[str, list[tuple[float, ...]]] = {"on": [], "off": []}
            if (a, b) != ("on", "off"):
                print(f"# sides: 'on' is a metrics-{a} node, 'off' a metrics-{b} node")
            print(f"| round | produce on | produce off | fetch on | fetch off | metadata on | "
                  f"metadata off |  (us of node CPU per request; produce v7 of {n} x "
                  f"{args.record_size} B, fetch v11 of {fetch_bytes} B, metadata v9 of one "
                  f"topic)\n|---|---|---|---|---|---|---|", flush=True)
            for r in range(args.ab):
                order = ("on", "off") if r % 2 == 0 else ("off", "on")
                for name in order:
                    node = nodes[name]
                    ps = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
                    prof = args.profile / f"{name}-{r}" if args.profile else None
                    cpu = []
                    for kind, fr in zip(KINDS, frames[name], strict=True):
                        user, system = measure(ps, node.port, fr, args.requests,
                                               prof / kind if prof else None)
                        cpu.append((user + system) / args.requests * 1e6)
                        if prof is not None:
                            ours, total = metrics_share(prof / f"{kind}.txt")
                            print(f"# py-spy {name} {kind}: {ours} of {total} samples in the "
                                  f"metrics code ({100 * ours / max(total, 1):.1f}%)")
                    rows[name].append(tuple(cpu))
                cells = [f"{rows[side][-1][i]:.1f}" for i in range(len(KINDS))
                         for side in ("on", "off")]
                print(f"| {r + 1} | {' | '.join(cells)} |", flush=True)
            for i, kind in enumerate(KINDS):
                on = [x[i] for x in rows["on"]]
                off = [x[i] for x in rows["off"]]
                diffs = sorted(a / b - 1 for a, b in zip(on, off, strict=True))
                print(f"{kind}: mean on {sum(on) / len(on):.1f} us, off {sum(off) / len(off):.1f}"
                      f" us: {100 * (sum(on) / sum(off) - 1):+.1f}%; per round "
                      f"{', '.join(f'{100 * d:+.1f}%' for d in diffs)} (median "
                      f"{100 * diffs[len(diffs) // 2]:+.1f}%)", flush=True)
        finally:
            for node in nodes.values():
                node.stop()


class CallgrindNode(BrokerProcess):
    """A node under callgrind, whose counters are zeroed and dumped from outside."""

    def __init__(self, data_dir: Path, settings: dict[str, str]) -> None:
        super().__init__(data_dir, settings=settings)
        self.out = data_dir.parent / f"{data_dir.name}.callgrind"

    def command(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={self.out}",
                "--vgdb=yes", "--dump-line=no", *super().command()]

    def _control(self, flag: str) -> None:
        assert self.proc is not None
        subprocess.run(["callgrind_control", flag, str(self.proc.pid)], check=True,
                       capture_output=True, timeout=600)

    def count(self, work: Any) -> tuple[int, float]:
        """(instructions of the whole process, seconds) while `work()` runs."""
        self._control("-z")
        before = set(self.out.parent.glob(self.out.name + "*"))
        start = time.monotonic()
        work()
        elapsed = time.monotonic() - start
        self._control("-d")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            new = sorted(set(self.out.parent.glob(self.out.name + "*")) - before,
                         key=lambda f: f.stat().st_mtime)
            if new:
                text = new[-1].read_text(errors="replace")
                totals = re.findall(r"^(?:totals|summary): (\d+)", text, re.M)
                if totals:
                    return int(totals[-1]), elapsed
            time.sleep(0.5)
        raise RuntimeError(f"no callgrind dump of {self.out} appeared")


def instructions(args: argparse.Namespace, settings: dict[str, str]) -> None:
    """Metrics on vs off in instructions: two nodes under callgrind (module docstring)."""
    os.environ["PYTHONHASHSEED"] = "0"  # the same dict and set layouts on both nodes
    n = int(args.records_per_batch.split(",")[0])
    fetch_bytes = int(args.fetch_bytes.split(",")[0])
    count = args.requests
    with tempfile.TemporaryDirectory(prefix="odradek-instr-") as tmp:
        nodes = {name: CallgrindNode(Path(tmp) / name, {**settings, **extra})
                 for name, extra in (("on", ON), ("off", OFF))}
        try:
            for node in nodes.values():
                node.start(timeout=900)
            frames = {}
            for name, node in nodes.items():
                ensure_topic(node.bootstrap, "cost", args.partitions, timeout=300)
                frames[name] = (produce_frames("cost", n, args.record_size, args.partitions),
                                fetch_frames("cost", fetch_bytes), metadata_frames("cost"))
                pipelined(node.port, frames[name][0], 200)  # records for the fetches
                for fr in frames[name]:
                    pipelined(node.port, fr, 200)  # warm up: imports, caches
            idle: dict[str, float] = {}
            for name, node in nodes.items():
                ir, secs = node.count(lambda: time.sleep(args.idle_seconds))
                idle[name] = ir / secs
            print(f"idle: on {idle['on'] / 1e6:.2f} M instructions/s, off "
                  f"{idle['off'] / 1e6:.2f} M instructions/s", flush=True)
            print(f"| request | metrics off | metrics on | added | share |  (instructions per "
                  f"request, whole node, {count} requests, idle rate subtracted)\n"
                  f"|---|---|---|---|---|", flush=True)
            for i, kind in enumerate(KINDS):
                per: dict[str, float] = {}
                raw: dict[str, float] = {}
                for name, node in nodes.items():
                    fr = frames[name][i]
                    ir, secs = node.count(lambda: pipelined(node.port, fr, count))  # noqa: B023
                    raw[name] = ir / count
                    per[name] = (ir - idle[name] * secs) / count
                added = per["on"] - per["off"]
                print(f"| {kind} | {per['off']:,.0f} | {per['on']:,.0f} | {added:,.0f} | "
                      f"{100 * added / per['off']:.2f}% |  (raw: off {raw['off']:,.0f}, on "
                      f"{raw['on']:,.0f})", flush=True)
        finally:
            for node in nodes.values():
                node.stop(timeout=300)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--records-per-batch", default="1,1000")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--bytes", type=int, default=500_000_000,
                        help="produce about this many record bytes per batch size (fewer "
                             "requests for big batches)")
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions of the topic; each produce request carries one batch "
                             "for each")
    parser.add_argument("--fetch-bytes", default="1000,20000,1000000",
                        help="partition_max_bytes of the fetches (the response carries whole "
                             "batches up to about that much).")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a node setting (repeatable), e.g. `--set admin.listeners= --set "
                             "request.slow.log.ms=-1` for a node that measures no requests "
                             "(the metrics A/B in bench/RESULTS.md, issue 18)")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="py-spy the node during each measurement into DIR.")
    parser.add_argument("--ab", type=int, default=0, metavar="ROUNDS",
                        help="metrics on vs off: ROUNDS interleaved rounds on two nodes, of "
                             "--requests each (the first --records-per-batch and --fetch-bytes)")
    parser.add_argument("--sides", default="on,off", choices=("on,off", "on,on", "off,off"),
                        help="with --ab: the two nodes' settings (on,on is the control: two "
                             "processes of the same settings)")
    parser.add_argument("--instructions", action="store_true",
                        help="metrics on vs off in instructions of the whole node process, "
                             "each node under valgrind's callgrind (--requests of each kind; "
                             "a few thousand are enough)")
    parser.add_argument("--idle-seconds", type=float, default=10.0,
                        help="with --instructions: how long the idle nodes are counted")
    args = parser.parse_args(argv)
    settings = {"message.max.bytes": str(MAX_BATCH_BYTES),
                "socket.request.max.bytes": str(4 * MAX_BATCH_BYTES),
                **dict(kv.split("=", 1) for kv in args.set)}
    if args.instructions:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        instructions(args, settings)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    if args.ab:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        ab(args, settings)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0

    def where(name: str) -> Path | None:
        return args.profile / name if args.profile else None
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="odradek-cost-") as tmp:
        node = BrokerProcess(Path(tmp) / "data", settings=settings)
        node.start()
        try:
            ps = psutil.Process(node.proc.pid)  # type: ignore[union-attr]
            ensure_topic(node.bootstrap, "cost", args.partitions)
            for n in (int(x) for x in args.records_per_batch.split(",")):
                frames = produce_frames("cost", n, args.record_size, args.partitions)
                # at most --bytes of records for big batches, at least 20 requests
                per_request = n * args.partitions * args.record_size
                count = max(20, min(args.requests, args.bytes // per_request))
                user, system = measure(ps, node.port, frames, count, where(f"produce-{n}"))
                cpu = user + system
                recs = count * n * args.partitions
                nbytes = recs * args.record_size
                print(f"produce v7, {args.partitions} x {n} x {args.record_size} B per request: "
                      f"{count} requests, {cpu / count * 1e6:.1f} us/request, "
                      f"{cpu / recs * 1e6:.3f} us/record, {cpu / (nbytes / GB):.2f} CPU s/GB "
                      f"(user {user / (nbytes / GB):.2f}, sys {system / (nbytes / GB):.2f})",
                      flush=True)
            for max_bytes in (int(x) for x in args.fetch_bytes.split(",")):
                frames = fetch_frames("cost", max_bytes)
                count = max(200, args.requests // max(1, max_bytes // 10000))
                user, system = measure(ps, node.port, frames, count, where(f"fetch-{max_bytes}"))
                cpu = user + system
                print(f"fetch v11, partition_max_bytes {max_bytes}: {count} requests, "
                      f"{cpu / count * 1e6:.1f} us/request", flush=True)
        finally:
            node.stop()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
