"""The harness's own small workload and check, for runs before (or without) `checker`'s W1-W4.

`SmokeWorkload`: one idempotent acks=all confluent-kafka producer per partition sends
increasing unique ints (key "<topic>-<p>"), each send an invoke and then ok with its offset,
fail on a definite error, info when the outcome is unknown (a timeout). `final_reads` reads
every partition from the start to its end offset after the heal, as one "poll" op.
`smoke_check` says which acknowledged values the final read lacks (lost-write), which values
it holds twice (duplicate), and where a partition's order breaks the producer's
(nonmonotonic).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer as KConsumer
from confluent_kafka import KafkaError, Producer, TopicPartition

__all__ = ["SmokeWorkload", "smoke_check"]

DEFINITE = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError._INVALID_ARG,
            KafkaError.INVALID_RECORD, KafkaError.RECORD_LIST_TOO_LARGE}


class SmokeWorkload:
    def __init__(self, env: Any, history: Any, rng: Any) -> None:
        self.env = env
        self.history = history
        self.rng = rng
        self.topic = env.topics[0]

    def _producer(self, partition: int, stop: threading.Event) -> None:
        key = f"{self.topic}-{partition}"
        producer = Producer({**self.env.client_config, "bootstrap.servers": self.env.bootstrap,
                             "enable.idempotence": True, "acks": "all",
                             "delivery.timeout.ms": 20000, "request.timeout.ms": 5000,
                             "max.in.flight.requests.per.connection": 5})
        value = 0
        lock = threading.Lock()
        pending: dict[int, Any] = {}

        def report(err: Any, msg: Any, op: Any, v: int) -> None:
            with lock:
                pending.pop(v, None)
            if err is None:
                self.history.ok(op, [["send", key, [msg.offset(), v]]])
            elif err.code() in DEFINITE:
                self.history.fail(op, [["send", key, v]], str(err))
            else:
                self.history.info(op, [["send", key, v]], str(err))

        while not stop.is_set():
            value += 1
            op = self.history.invoke(f"producer-{partition}", "send", [["send", key, value]])
            with lock:
                pending[value] = op
            while True:
                try:
                    producer.produce(self.topic, str(value).encode(), str(value).encode(),
                                     partition=partition,
                                     on_delivery=lambda e, m, op=op, v=value: report(e, m, op, v))
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0.02 if self.rng.random() < 0.5 else 0.0)
        producer.flush(30)
        with lock:  # never delivered nor failed in time: outcome unknown
            for v, op in list(pending.items()):
                self.history.info(op, [["send", key, v]], "not reported by the end of the run")

    def run(self, stop: threading.Event) -> None:
        threads = [threading.Thread(target=self._producer, args=(p, stop), daemon=True)
                   for p in range(self.env.partitions)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def final_reads(self) -> None:
        consumer = KConsumer({**self.env.client_config, "bootstrap.servers": self.env.bootstrap,
                              "group.id": "jepsen-final", "enable.auto.commit": False,
                              "isolation.level": "read_committed",
                              "auto.offset.reset": "earliest"})
        try:
            parts = [TopicPartition(self.topic, p, 0) for p in range(self.env.partitions)]
            ends = {p.partition: consumer.get_watermark_offsets(p, timeout=30)[1]
                    for p in parts}
            op = self.history.invoke("final-reader", "poll", None)
            consumer.assign(parts)
            got: dict[str, list[list[int]]] = {f"{self.topic}-{p}": [] for p in ends}
            done = {p for p, end in ends.items() if end == 0}
            while len(done) < len(ends):
                msg = consumer.poll(5.0)
                if msg is None or msg.error():
                    continue
                p = msg.partition()
                got[f"{self.topic}-{p}"].append([msg.offset(), int(msg.value())])
                if msg.offset() + 1 >= ends[p]:
                    done.add(p)
            self.history.ok(op, [["poll", got]])
        finally:
            consumer.close()


@dataclass
class SmokeReport:
    acked: int = 0
    read: int = 0
    anomalies: dict[str, list[Any]] = field(default_factory=dict)

    def table(self) -> str:
        rows = [f"acked {self.acked}, read back {self.read}"]
        for name in ("lost-write", "duplicate", "nonmonotonic"):
            found = self.anomalies.get(name, [])
            rows.append(f"{name:<14} {len(found):>6}  {found[:5] if found else ''}")
        return "\n".join(rows)


def smoke_check(ops: list[Any]) -> SmokeReport:
    report = SmokeReport()
    acked: dict[str, set[int]] = {}
    final: dict[str, list[list[int]]] = {}
    for op in ops:
        if op.type != "ok" or not op.value:
            continue
        for micro in op.value:
            if micro[0] == "send":
                acked.setdefault(micro[1], set()).add(int(micro[2][1]))
            elif micro[0] == "poll" and op.process == "final-reader":
                final = micro[1]
    lost, dup, order = [], [], []
    for key, values in sorted(acked.items()):
        seen = [v for _, v in final.get(key, [])]
        report.acked += len(values)
        lost += [(key, v) for v in sorted(values - set(seen))]
    for key, pairs in sorted(final.items()):
        seen = [v for _, v in pairs]
        report.read += len(seen)
        counts: dict[int, int] = {}
        for v in seen:
            counts[v] = counts.get(v, 0) + 1
        dup += [(key, v) for v, c in sorted(counts.items()) if c > 1]
        order += [(key, a, b) for a, b in itertools.pairwise(seen) if b <= a]
    report.anomalies = {"lost-write": lost, "duplicate": dup, "nonmonotonic": order}
    return report
