"""What the metrics add to one request, measured in-process: nanoseconds, or instructions.

    python -m bench.metrics_cost [--calls 300000] [--repeat 7]
    python -m bench.metrics_cost --instructions [--n 3000] [--paths produce,fetch]

bench.node_cost's A/B (metrics on vs off) measures the node's CPU per request with psutil,
whose 10 ms ticks and a loaded shared machine blur a difference of about a microsecond.

The default mode times the added work itself with timeit's best of --repeat: the server's
receipt stamp (one perf_counter per read; here one read per request, the worst case), the
measuring closure around a handler that answers at once, and a partition's produce
counters; the same calls without them are subtracted.

`--instructions` counts the interpreter's instructions (valgrind cachegrind, which the load
does not move) of whole requests through the real Dispatcher, as the server calls it: the
header parse, then Produce v7 of one 100-byte record (acks=1) or Fetch v11 of 1000 bytes on a
real Log, with and without the measuring closure and the receipt stamp. Each is run in a
child process twice, calling it N times and not at all, after the same set-up and warm-up;
the difference over N is one request's cost, and the metrics' share is the difference
between the measured and the bare request over the bare one. The node's CPU per request
(bench.node_cost) also holds the event loop and the socket calls, which this leaves out:
the share of the node's CPU is smaller than this share.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from odradek.broker.metrics.requests import RequestStats, measured_dispatch
from odradek.protocol.headers import parse_request_header

ANSWER = (0, [b"x"])
WARMUP = 300


class _Handler:
    """Called as the server calls the Dispatcher (an object with __call__)."""

    def __call__(self, conn: Any, frame: memoryview, header: Any) -> Any:
        return ANSWER


class _Conn:
    __slots__ = ("last_done", "peer", "received")

    def __init__(self) -> None:
        self.received = self.last_done = 0.0
        self.peer = "127.0.0.1:1"


def _header() -> Any:
    # a Produce v7 header with a client id, as librdkafka sends it
    cid = b"rdkafka"
    raw = (0).to_bytes(2, "big") + (7).to_bytes(2, "big") + (1).to_bytes(4, "big")
    return parse_request_header(raw + len(cid).to_bytes(2, "big") + cid)


def unmeasured(dispatcher: Any) -> Any:
    """What the server calls when nothing is measured (broker.node_admin.NodeAdmin.dispatch)."""
    from odradek.broker.node_admin import NodeAdmin

    return NodeAdmin.unmeasured(dispatcher)


def timed(args: argparse.Namespace) -> None:
    header = _header()
    frame = memoryview(b"")
    conn = _Conn()
    bare_call = unmeasured(_Handler())
    measured = measured_dispatch(_Handler(), RequestStats(slow_ms=10_000))
    perf = time.perf_counter

    def bare() -> None:
        bare_call(conn, frame, header)

    def with_metrics() -> None:
        # the server's stamp per read (one request per read here: the worst case)
        conn.received = conn.last_done = perf()
        measured(conn, frame, header)

    class Part:  # the counters replication.partition.Partition carries (slots, as there)
        __slots__ = ("bytes_in", "messages_in", "produce_requests", "topic", "uuid")

        def __init__(self) -> None:
            self.topic, self.uuid = "t", uuid.uuid4()
            self.produce_requests = self.messages_in = self.bytes_in = 0

    part = Part()

    def counters() -> None:
        part.produce_requests += 1
        part.messages_in += 10
        part.bytes_in += 1000

    def nothing() -> None:
        pass

    def best(fn: Any) -> float:
        return min(timeit.repeat(fn, number=args.calls, repeat=args.repeat)) / args.calls * 1e9

    base, full = best(bare), best(with_metrics)
    empty, counted = best(nothing), best(counters)
    print(f"dispatch without metrics: {base:.0f} ns/request; with: {full:.0f} ns/request; "
          f"added {full - base:.0f} ns")
    print(f"partition produce counters: added {counted - empty:.0f} ns/request")
    print(f"total added: {full - base + counted - empty:.0f} ns/request")


# -- instructions -------------------------------------------------------------------------

def _request(path: str, tmp: Path) -> tuple[Any, memoryview, Any]:
    """(dispatcher, frame, conn) for a whole request of `path` on a real Log in `tmp`."""
    from bench.hotpath_instructions import LOG_BATCHES, _fetch_frame, _produce_frame, _setup
    from odradek.broker import apis

    rm, part, ctx = _setup(tmp)
    payload, batch = _produce_frame("hot")
    for _ in range(LOG_BATCHES):
        rm.append_to(part, memoryview(batch), 1, 7)
    ctx.advertised_apis = apis.advertised_apis()
    ctx.authorizer = None
    ctx.quotas = SimpleNamespace(active=False)
    ctx.schema_validation = None
    frame = memoryview(payload if path == "produce" else _fetch_frame("hot", 1000))
    return apis.Dispatcher(ctx), frame, _Conn()  # type: ignore[arg-type]


def child(path: str, mode: str, n: int) -> None:
    """Set up, warm up, then run `n` requests of `path` (under cachegrind)."""
    with tempfile.TemporaryDirectory(prefix="odradek-mc-") as tmp:
        _run(*_request(path, Path(tmp)), mode, n)


def _run(dispatcher: Any, frame: memoryview, conn: Any, mode: str, n: int) -> None:
    parse = parse_request_header
    if mode == "bare":
        dispatch = unmeasured(dispatcher)

        def call() -> Any:
            return dispatch(conn, frame, parse(frame))
    else:
        dispatch = measured_dispatch(dispatcher, RequestStats(slow_ms=10_000))
        perf = time.perf_counter

        def call() -> Any:
            # the server's stamp per read (one request per read: the worst case)
            conn.received = conn.last_done = perf()
            return dispatch(conn, frame, parse(frame))
    for _ in range(WARMUP):
        result = call()
    assert type(result) is tuple, result  # answered at once, as the node answers these
    for _ in range(n):
        call()


def instructions(path: str, mode: str, n: int) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    root = str(Path(__file__).resolve().parent.parent)  # bench/ and tests/support/
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    with tempfile.TemporaryDirectory(prefix="odradek-cg-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
             sys.executable, "-m", "bench.metrics_cost", "--child", f"{path}:{mode}",
             "--n", str(n)],
            env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{path} {mode} n={n} failed:\n{proc.stderr[-3000:]}")
    match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    if match is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def counted(args: argparse.Namespace) -> None:
    for path in args.paths.split(","):
        per = {}
        for mode in ("bare", "measured"):
            per[mode] = (instructions(path, mode, args.n)
                         - instructions(path, mode, 0)) / args.n
        added = per["measured"] - per["bare"]
        print(f"{path}: {per['bare']:,.0f} instructions per request unmeasured, "
              f"{per['measured']:,.0f} measured: {added:,.0f} added "
              f"({100 * added / per['bare']:.1f}%; n={args.n})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions of whole requests under cachegrind")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--paths", default="produce,fetch")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        path, mode = args.child.split(":")
        child(path, mode, args.n)
    elif args.instructions:
        counted(args)
    else:
        timed(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
