"""Console page times (issue 18's benchmark): the topic list's first page and a search at
1,000 topics, and a message search's scan rate, against one `odradek serve` node running the
console. Times are the client's on loopback (request sent to last byte), p50/p95.

    python -m bench.console_pages --topics 1000 --records 1000000
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess, free_port


def _get(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=300) as resp:
        resp.read()
        assert resp.status == 200
    return time.perf_counter() - began


def _wait(url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"{url} did not answer")


def _pcts(samples: list[float]) -> str:
    qs = statistics.quantiles(samples, n=20)
    return f"p50 {statistics.median(samples) * 1000:.0f} ms, p95 {qs[18] * 1000:.0f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        console = f"http://127.0.0.1:{free_port()}"
        node = BrokerProcess(Path(tmp) / "data", settings={"console.listeners": console})
        node.start(timeout=120)
        try:
            _wait(console + "/api/info")
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            names = [f"bench-topic-{i:04d}" for i in range(args.topics)]
            for i in range(0, len(names), 100):
                futures = admin.create_topics([NewTopic(n, 1, 1) for n in names[i:i + 100]])
                for f in futures.values():
                    f.result(120)
            _get(console + "/api/topics")  # warm the metadata cache
            first = [_get(console + "/api/topics?page=1&size=50") for _ in range(args.rounds)]
            found = [_get(console + "/api/topics?q=topic-05&page=1")
                     for _ in range(args.rounds)]
            print(f"topic list, first page of 50 at {args.topics} topics: {_pcts(first)}")
            print(f"topic list, search (100 hits, page of 50): {_pcts(found)}")
            admin.create_topics([NewTopic("bench-search", 1, 1)])["bench-search"].result(60)
            p = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 20,
                          "batch.num.messages": 10000, "queue.buffering.max.messages": 500000})
            began = time.perf_counter()
            for i in range(args.records):
                while True:
                    try:
                        p.produce("bench-search", value=b'{"n": %d, "pad": "xxxxxxxxxxxxxxxx"}' % i)
                        break
                    except BufferError:
                        p.poll(0.05)
            p.flush(300)
            print(f"produced {args.records} records in {time.perf_counter() - began:.1f} s")
            began = time.perf_counter()
            with urllib.request.urlopen(console + "/api/topics/bench-search/search?start=oldest"
                                        f"&value=no-such-thing&max_scan={args.records}",
                                        timeout=3600) as resp:
                last = [json.loads(line) for line in resp.read().splitlines()][-1]
            took = time.perf_counter() - began
            print(f"search over {last['done']} records: {took:.1f} s, "
                  f"{last['done'] / took:,.0f} records/s scanned")
        finally:
            node.stop()


if __name__ == "__main__":
    main()
