"""Issue 16: a producer and a consumer held to their byte-rate quotas.

    python -m bench.quota_rates [--rate 1048576] [--seconds 60] [--warmup 20]

One fresh node (Kafka's quota window: 11 samples of 1 s). A client-id quota of `--rate`
bytes/s for producer_byte_rate (client `bench-prod`) and consumer_byte_rate (`bench-cons`)
set with `odradek quota set`. A confluent-kafka producer sends 1 KiB records as fast as it
may for `--seconds`; then a consumer reads the topic back for as long. Each side's rate is
the payload bytes acknowledged (producer) or received (consumer) per second after the
warm-up (the first window lets a new client burst, as in Kafka); it must be within ±15% of
the quota. The quota counts request/response bytes, a little more than the payload.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from tests.support.broker import BrokerProcess

VALUE = b"q" * 1024
TOPIC = "quota-bench"


def _quota(bootstrap: str, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "odradek.cli.main", "quota", "set", *args,
                    "-b", bootstrap], check=True, capture_output=True)


def produce(bootstrap: str, seconds: float, warmup: float) -> tuple[float, float]:
    """(rate after the warm-up, rate over the whole run), payload bytes per second."""
    acked: list[float] = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "bench-prod", "linger.ms": 5,
                  "queue.buffering.max.kbytes": 4096})

    def done(err: object, msg: object) -> None:
        if err is None:
            acked.append(time.monotonic())

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            p.produce(TOPIC, VALUE, on_delivery=done)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(60)
    return _rates(acked, start, start + seconds, warmup)


def consume(bootstrap: str, seconds: float, warmup: float) -> tuple[float, float]:
    got: list[float] = []
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": "bench-cons",
                  "group.id": "quota-bench", "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 1 << 20})
    c.subscribe([TOPIC])
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            for msg in c.consume(500, 0.5):
                if msg.error() is None:
                    got.append(time.monotonic())
    finally:
        c.close()
    return _rates(got, start, start + seconds, warmup)


def _rates(stamps: list[float], start: float, end: float, warmup: float) -> tuple[float, float]:
    steady = [t for t in stamps if start + warmup <= t <= end]
    size = len(VALUE)
    return len(steady) * size / (end - start - warmup), len(stamps) * size / (end - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=1 << 20, help="quota, bytes/s")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=20.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        node = BrokerProcess(Path(tmp) / "data").start()
        try:
            b = node.bootstrap
            admin = AdminClient({"bootstrap.servers": b})
            admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(30)
            _quota(b, "--client-id", "bench-prod", "--add", f"producer_byte_rate={args.rate}")
            _quota(b, "--client-id", "bench-cons", "--add", f"consumer_byte_rate={args.rate}")
            results = {"producer": produce(b, args.seconds, args.warmup),
                       "consumer": consume(b, args.seconds, args.warmup)}
        finally:
            node.stop()
    ok = True
    print(f"quota {args.rate} B/s, {args.seconds:g} s per side, warm-up {args.warmup:g} s")
    for side, (steady, whole) in results.items():
        ratio = steady / args.rate
        ok &= 0.85 <= ratio <= 1.15
        print(f"{side:9} steady {steady / 1024:8.1f} KiB/s ({ratio:5.1%} of the quota), "
              f"whole run {whole / 1024:8.1f} KiB/s")
    print("within ±15%" if ok else "OUTSIDE ±15%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
