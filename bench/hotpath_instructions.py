"""Interpreter instructions per request on the node's hottest paths (valgrind cachegrind).

    python -m bench.hotpath_instructions [--src DIR] [--n 3000] [--paths produce,fetch,...]
    python -m bench.hotpath_instructions --ab [--n 3000] [--src DIR]   # metrics on vs off

Wall-clock CPU per request (bench.node_cost) cannot resolve a few percent on a machine shared
by other work; instruction counts can, as the load does not move them. Each path is run in
a child process under `valgrind --tool=cachegrind` twice, once calling it N times and once
not at all, after the same set-up and warm-up; (instructions(N) - instructions(0)) / N is the
cost of one call. `PYTHONHASHSEED=0` keeps dict and set layouts the same between the runs.

`--src DIR` runs the odradek package found in DIR (a `src/` directory) instead of the
installed one: to compare two versions, check the old one out
(`git archive <commit> src | tar -x -C /tmp/a`) and run this once with `--src /tmp/a/src`
and once without.

Every path runs on a real broker without sockets (tests/unit/broker/support.py: controller,
log manager, replica manager and BrokerContext in a temporary directory) holding topic "hot"
with one partition:
- `append_to`: ReplicaManager.append_to with one batch of one 100-byte record (non-idempotent,
  acks=1): validation, producer-state dispatch, append (the write included).
- `fetch`: the Fetch handler, Fetch v11 of 1000 bytes at offset 0 (decode, read, encode).
- `fetch_large`: the same with 1 MB of a log of 300 such batches: the whole log (about
  51 KB) as a region the server sends with sendfile (the send itself is not measured).
- `produce_request`, `fetch_request`: Produce v7 of that batch / the Fetch of `fetch` through
  the header parse and the Dispatcher (decode, handler, encode).
- `produce16`, `fetch16`: the same requests as `produce` and `fetch_conn`, 16 in one read (as
  bench.node_cost's client pipelines them): all but the first are queued behind another, the
  metrics' costlier path (queue time, three buckets). --n counts requests (a multiple of 16).
- `produce`, `fetch_conn`, `metadata`: whole requests through the server's Connection, as
  the event loop drives it: the bytes of one request land in its receive buffer
  (`buffer_updated`: framing, header, the Dispatcher, the answer's framing), then one pass of
  the loop writes the answer to a transport that drops it. Metadata is v9 for "hot", as a
  client's refresh. With `--metrics on` the Connection times requests into a RequestStats
  (as a node with admin.listeners does), `off` not (admin.listeners empty, no slow log). Left
  out: the selector's wait, the socket calls and the transport's own read path, which a
  node pays per read on top of this (so a share of these figures is an upper bound of the
  share of the node's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PATHS = ("append_to", "fetch", "fetch_large", "produce_request", "fetch_request")
SERVER_PATHS = ("produce", "fetch_conn", "metadata", "produce16", "fetch16")
# requests in one read on the pipelined paths (bench.node_cost's client keeps 16 in flight)
DEEP = 16
WARMUP = 200
# batches in the log before a fetch path runs: the 1000-byte fetch at offset 0 reads several
LOG_BATCHES = 50
LARGE_LOG_BATCHES = 300


def _produce_frame(topic: str) -> tuple[bytes, bytes]:
    """(a Produce v7 frame payload without its size prefix, its one record batch)."""
    import time

    from kio.schema.produce.v7 import request as p7
    from kio.static.primitive import i16, i32
    from tests.support import requests as rq
    from tests.support import wire

    batch = wire.build_batch_v2([wire.Rec(None, b"x" * 100, [], int(time.time() * 1000))])
    req = p7.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=rq.TIMEOUT,
        topic_data=(p7.TopicProduceData(name=topic, partition_data=(
            p7.PartitionProduceData(index=i32(0), records=batch),)),))
    return wire.request_payload(req, 7), batch


def _fetch_frame(topic: str, max_bytes: int) -> bytes:
    import datetime

    from kio.schema.fetch.v11 import request as f11
    from kio.static.primitive import i8, i32, i64
    from tests.support import wire

    req = f11.FetchRequest(
        replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1),
        max_bytes=i32(max_bytes), isolation_level=i8(0), session_id=i32(0),
        session_epoch=i32(-1), rack_id="", forgotten_topics_data=(),
        topics=(f11.FetchTopic(topic=topic, partitions=(f11.FetchPartition(
            partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
            log_start_offset=i64(-1), partition_max_bytes=i32(max_bytes)),)),))
    return wire.request_payload(req, 9)


def _metadata_frame(topic: str) -> bytes:
    from tests.support import requests as rq
    from tests.support import wire

    return wire.request_payload(rq.metadata_v9([topic], auto_create=False), 11)


def _broker(tmp: Path) -> Any:
    """A broker without sockets holding "hot"-0 (tests/unit/broker/support.py)."""
    from tests.unit.broker.support import Broker

    broker = Broker(tmp)
    broker.create("hot")
    return broker


def _append_to(rm: Any, part: Any, records: memoryview) -> Any:
    return rm.append_to(part, records, 1, 7)


class _Transport:
    """What a Connection writes to: answers are counted and dropped."""

    def __init__(self) -> None:
        self.answers = 0
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def set_write_buffer_limits(self, high: int = 0, low: int = 0) -> None:
        pass

    def writelines(self, parts: list[Any]) -> None:
        self.answers += 1

    def write(self, data: Any) -> None:
        self.answers += 1

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _server(dispatcher: Any, metrics: bool) -> Any:
    """The Server a node builds, measuring requests or not; either version of the code (until
    h18 the measuring was a wrapper round the Dispatcher, with the server stamping reads)."""
    from odradek.broker.metrics import requests as rqm
    from odradek.broker.server import Server

    stats = rqm.RequestStats(slow_ms=10_000) if metrics else None
    if hasattr(rqm, "measured_dispatch"):
        call = (rqm.measured_dispatch(dispatcher, stats) if stats is not None
                else rqm.bound_call(dispatcher))
        return Server(call, 100 << 20)
    return Server(rqm.bound_call(dispatcher), 100 << 20, stats=stats)


def _serve(path: str, broker: Any, metrics: bool, n: int, freeze: bool = False) -> None:
    """`n` requests of `path` through a Connection on a running loop, after a warm-up (and
    with `freeze`, gc.freeze() after it, as a node does once it serves)."""
    from odradek.broker.server import Connection

    frame = {"produce": lambda: _produce_frame("hot")[0],
             "fetch_conn": lambda: _fetch_frame("hot", 1000),
             "metadata": lambda: _metadata_frame("hot"),
             "produce16": lambda: _produce_frame("hot")[0],
             "fetch16": lambda: _fetch_frame("hot", 1000)}[path]()
    data = len(frame).to_bytes(4, "big") + frame
    deep = path.endswith("16")
    if deep:  # DEEP requests in one read: all but the first queued behind another
        data *= DEEP
        n //= DEEP

    async def run() -> None:
        conn = Connection(_server(broker.dispatch, metrics))
        transport = _Transport()
        conn.connection_made(transport)  # type: ignore[arg-type]

        def one() -> None:
            pos = 0
            while pos < len(data):
                buf = conn.get_buffer(-1)
                got = min(len(buf), len(data) - pos)
                buf[:got] = data[pos:pos + got]
                conn.buffer_updated(got)
                pos += got
        for _ in range(WARMUP):
            one()
            await asyncio.sleep(0)  # the loop pass that writes the answer(s)
        assert transport.answers == WARMUP and not transport.closed, "requests not answered"
        if freeze:
            gc.freeze()
        for _ in range(n):
            one()
            await asyncio.sleep(0)
        # a read's answers leave in one writelines
        assert transport.answers == WARMUP + n and not transport.closed

    asyncio.run(run())


def child(path: str, n: int, metrics: bool, freeze: bool = False) -> None:
    """Set up, warm up, then run `path` n times (under cachegrind)."""
    from odradek.protocol.headers import parse_request_header

    with tempfile.TemporaryDirectory(prefix="odradek-hot-") as tmp_name:
        broker = _broker(Path(tmp_name))
        rm, ctx = broker.rm, broker.ctx
        part = rm.partitions[("hot", 0)]
        payload, batch = _produce_frame("hot")
        records = memoryview(batch)
        # fetch_large: past the 32 KiB a fetch reads inline, so the records go as a region
        for _ in range(LARGE_LOG_BATCHES if path == "fetch_large" else LOG_BATCHES):
            _append_to(rm, part, records)
        if path in SERVER_PATHS:
            _serve(path, broker, metrics, n, freeze)
            broker.close()
            return
        if path == "append_to":
            def call() -> Any:
                return _append_to(rm, part, records)
        elif path in ("fetch", "fetch_large", "fetch_request", "produce_request"):
            frame = memoryview(payload if path == "produce_request"
                               else _fetch_frame("hot", 1_000_000 if path == "fetch_large"
                                                 else 1000))
            header = parse_request_header(frame)
            if path in ("fetch", "fetch_large"):
                from odradek.broker.handlers import fetch

                def call() -> Any:
                    return fetch.handle(ctx, header, frame)
            else:
                dispatch, conn = broker.dispatch, broker.conn

                def call() -> Any:
                    return dispatch(conn, frame, parse_request_header(frame))
        else:
            raise SystemExit(f"unknown path {path}")
        result = None
        for _ in range(WARMUP):
            result = call()
        if path.startswith("fetch"):
            # the fetch must have read records, or it measures an empty answer
            # (a FileRegion counts by its size)
            sent = sum(getattr(p, "size", None) or len(p) for p in result[1])
            assert result is not None and sent > (50_000 if path == "fetch_large" else 800), result
        for _ in range(n):
            call()
        broker.close()


def instructions(path: str, n: int, src: Path | None, metrics: bool = False,
                 freeze: bool = False) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    root = str(Path(__file__).resolve().parent.parent)  # bench/ and tests/
    env["PYTHONPATH"] = os.pathsep.join(([str(src)] if src else []) + [root])
    with tempfile.TemporaryDirectory(prefix="odradek-cg-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
             sys.executable, "-m", "bench.hotpath_instructions", "--child", path, "--n", str(n),
             "--metrics", "on" if metrics else "off", *(["--freeze"] if freeze else [])],
            env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{path} n={n} failed:\n{proc.stderr[-3000:]}")
        match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
        if match is None:
            raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
        return int(match.group(1).replace(",", ""))


def per_call(path: str, n: int, src: Path | None, metrics: bool = False,
             freeze: bool = False) -> float:
    return (instructions(path, n, src, metrics, freeze)
            - instructions(path, 0, src, metrics, freeze)) / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=None,
                        help="a src/ directory holding the odradek package to measure")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--paths", default=None,
                        help=f"comma-separated (default {','.join(PATHS)}; with --ab "
                             f"{','.join(SERVER_PATHS)})")
    parser.add_argument("--metrics", choices=("on", "off"), default="off",
                        help="the server paths: requests timed into the metrics or not")
    parser.add_argument("--ab", action="store_true",
                        help="the server paths with metrics on and off, and the difference")
    parser.add_argument("--freeze", action="store_true",
                        help="the server paths: gc.freeze() after the warm-up, as the node "
                             "does once it serves (broker.node.Node.mark_started)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.n, args.metrics == "on", args.freeze)
        return 0
    which = f"{args.src or 'installed odradek'}{', gc.freeze()' if args.freeze else ''}"
    paths = (args.paths or ",".join(SERVER_PATHS if args.ab else PATHS)).split(",")
    for path in paths:
        if args.ab:
            off = per_call(path, args.n, args.src, False, args.freeze)
            on = per_call(path, args.n, args.src, True, args.freeze)
            print(f"{path}: {off:,.0f} instructions per request with metrics off, {on:,.0f} "
                  f"on: {on - off:,.0f} added ({100 * (on - off) / off:.2f}%; {which}, "
                  f"n={args.n})", flush=True)
            continue
        cost = per_call(path, args.n, args.src, args.metrics == "on", args.freeze)
        print(f"{path}: {cost:,.0f} instructions per call ({which}, n={args.n})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
