"""Deterministic orders (JSON) and payments (Avro, Confluent wire format) for the fraud example.

    python -m examples.fraud.generate -b localhost:9092 --orders orders --payments payments

Most orders are paid 5 s to 9 min after they are placed, for their amount. Some are paid a
different amount, some never, and some 12-20 min late (outside the 10-minute bound). A last
order, paid at once, comes two hours later so the watermarks move past every other order.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from confluent_kafka import Producer

from examples._args import parser
from examples.fraud.schemas import payment_codec

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Order:
    order_id: str
    user: str
    amount_cents: int
    ts: datetime


@dataclass(frozen=True)
class Payment:
    payment_id: str
    order_id: str
    amount_cents: int
    ts: datetime


def generate(orders: int = 60, seed: int = 3) -> tuple[list[Order], list[Payment]]:
    rng = random.Random(seed)
    out_o: list[Order] = []
    out_p: list[Payment] = []
    at = START
    for i in range(orders + 1):
        closing = i == orders
        at += timedelta(hours=2) if closing else timedelta(milliseconds=rng.randrange(5_000, 40_000))
        o = Order(f"o-{seed}-{i:05d}", f"user-{rng.randrange(12):02d}", rng.randrange(500, 50_000), at)
        out_o.append(o)
        kind = "paid" if closing else rng.choices(["paid", "mismatch", "none", "late"], [7, 1, 1, 1])[0]
        if kind == "none":
            continue
        delay = (timedelta(milliseconds=rng.randrange(12 * 60_000, 20 * 60_000)) if kind == "late"
                 else timedelta(milliseconds=rng.randrange(5_000, 9 * 60_000)))
        amount = o.amount_cents + (rng.choice([-100, 250, 1]) if kind == "mismatch" else 0)
        out_p.append(Payment(f"p-{seed}-{i:05d}", o.order_id, amount, o.ts + delay))
    out_p.sort(key=lambda p: p.ts)
    return out_o, out_p


def order_json(o: Order) -> bytes:
    return json.dumps({"order_id": o.order_id, "user": o.user, "amount_cents": o.amount_cents,
                       "ts": o.ts.isoformat().replace("+00:00", "Z")}).encode()


def produce(bootstrap: str, orders_topic: str, payments_topic: str, orders: int = 60,
            seed: int = 3) -> tuple[list[Order], list[Payment]]:
    os_, ps = generate(orders, seed)
    codec = payment_codec()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for o in os_:
        producer.produce(orders_topic, value=order_json(o), key=o.order_id.encode())
    for p in ps:
        value = codec.encode({"payment_id": p.payment_id, "order_id": p.order_id,
                              "amount_cents": p.amount_cents, "ts": p.ts})
        producer.produce(payments_topic, value=value, key=p.order_id.encode())
    if producer.flush(30):
        raise RuntimeError("not every record was delivered")
    return os_, ps


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__)
    ap.add_argument("--orders", default="orders")
    ap.add_argument("--payments", default="payments")
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args(argv)
    os_, ps = produce(args.bootstrap, args.orders, args.payments, args.count, args.seed)
    print(f"produced {len(os_)} orders to {args.orders} and {len(ps)} payments to {args.payments}")


if __name__ == "__main__":
    main()
