"""Interpreter instructions per request on the node's hottest paths (valgrind cachegrind).

    python -m bench.hotpath_instructions [--src DIR] [--n 3000] [--paths append_to,fetch,...]

Wall-clock CPU per request (bench.node_cost) cannot resolve a few percent on a machine shared
by other work; instruction counts can, as the load does not move them. Each path is run in
a child process under `valgrind --tool=cachegrind` twice, once calling it N times and once
not at all, after the same set-up and warm-up; (instructions(N) - instructions(0)) / N is the
cost of one call. `PYTHONHASHSEED=0` keeps dict and set layouts the same between the runs.

`--src DIR` runs the odradek package found in DIR (a `src/` directory) instead of the
installed one: to compare two versions, check the old one out
(`git archive <commit> src | tar -x -C /tmp/a`) and run this once with `--src /tmp/a/src`
and once without. The paths use only names both old and new code have.

Paths (no sockets; a real Log in a temporary directory, a real Partition and ReplicaManager):
- `append_to`: ReplicaManager.append_to with one batch of one 100-byte record (non-idempotent,
  acks=1): validation, producer-state dispatch, append (the write included).
- `fetch`: the Fetch handler, Fetch v11 of 1000 bytes at offset 0 (decode, read, encode).
- `fetch_large`: the same with 1 MB of a log of 300 such batches: the whole log (about
  51 KB) as a region the server sends with sendfile (the send itself is not measured).
- `produce_request`: a whole Produce v7 request of one such batch through the header parse
  and the dispatcher (decode, append_to, encode).
- `fetch_request`: the Fetch request of `fetch` through the header parse and the dispatcher.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PATHS = ("append_to", "fetch", "fetch_large", "produce_request", "fetch_request")
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


def _setup(tmp: Path) -> tuple[Any, Any, Any]:
    """A ReplicaManager hosting one partition "hot"-0 on a fresh Log, and a context for the
    handlers."""
    from odradek.replication.manager import ReplicaManager
    from odradek.replication.partition import Partition
    from odradek.storage.config import LogConfig
    from odradek.storage.log import Log

    config = LogConfig()
    directory = tmp / "hot-0"
    directory.mkdir()
    the_log = Log.open(directory, config)
    part = Partition("hot", 0, uuid.uuid4(), the_log, leader=0, leader_epoch=0, replicas=[0],
                     isr=[0])
    rm = ReplicaManager(None, 0, tmp, lambda _topic: config)
    rm.partitions[("hot", 0)] = part
    ctx = SimpleNamespace(replica_manager=rm, image=SimpleNamespace(topics_by_id={}))
    return rm, part, ctx


def _append_to(rm: Any, part: Any, records: memoryview) -> Any:
    # the old signature took single_batch (bool), the new one the produce version (int):
    # 7 is truthy either way
    return rm.append_to(part, records, 1, 7)


def child(path: str, n: int) -> None:
    """Set up, warm up, then run `path` n times (under cachegrind)."""
    from odradek.protocol.headers import parse_request_header

    with tempfile.TemporaryDirectory(prefix="odradek-hot-") as tmp_name:
        rm, part, ctx = _setup(Path(tmp_name))
        payload, batch = _produce_frame("hot")
        records = memoryview(batch)
        # fetch_large: past the 32 KiB a fetch reads inline, so the records go as a region
        for _ in range(LARGE_LOG_BATCHES if path == "fetch_large" else LOG_BATCHES):
            _append_to(rm, part, records)
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
                from odradek.broker import apis

                ctx.advertised_apis = apis.advertised_apis()
                dispatch = apis.Dispatcher(ctx)  # type: ignore[arg-type]
                conn = SimpleNamespace(peer="127.0.0.1:1")

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


def instructions(path: str, n: int, src: Path | None) -> int:
    env = dict(os.environ, PYTHONHASHSEED="0")
    root = str(Path(__file__).resolve().parent.parent)  # bench/ and tests/support/
    env["PYTHONPATH"] = os.pathsep.join(([str(src)] if src else []) + [root])
    with tempfile.TemporaryDirectory(prefix="odradek-cg-") as tmp:
        out = Path(tmp) / "cachegrind.out"
        proc = subprocess.run(
            ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
             sys.executable, "-m", "bench.hotpath_instructions", "--child", path, "--n", str(n)],
            env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{path} n={n} failed:\n{proc.stderr[-3000:]}")
        match = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
        if match is None:
            raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
        return int(match.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=None,
                        help="a src/ directory holding the odradek package to measure")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.n)
        return 0
    which = args.src or "installed odradek"
    for path in args.paths.split(","):
        full = instructions(path, args.n, args.src)
        base = instructions(path, 0, args.src)
        print(f"{path}: {(full - base) / args.n:,.0f} instructions per call ({which}, "
              f"n={args.n})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
