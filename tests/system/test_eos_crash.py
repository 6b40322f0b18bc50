"""Consume-transform-produce with send_offsets_to_transaction, the application killed -9
at random points many times: at the end the output holds each input's result exactly once
and the group's committed offsets are the input's end offsets."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess
from tests.support.jepsen_checker import History, Send, check

PARTS = 3
INPUTS = 3000

APP = r'''
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, parts = sys.argv[1], int(sys.argv[2])
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-app", "linger.ms": 1})
p.init_transactions(30)
c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
c.assign([TopicPartition("eos-in", i) for i in range(parts)])
idle = 0
while idle < 10:
    msgs = c.consume(50, 0.3)
    msgs = [m for m in msgs if not m.error()]
    if not msgs:
        idle += 1
        continue
    idle = 0
    p.begin_transaction()
    for m in msgs:
        p.produce("eos-out", b"out:" + m.value(), key=m.key(), partition=m.partition())
    p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
c.close()
'''


def test_exactly_once_with_app_crashes(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    app_path = tmp_path / "app.py"
    app_path.write_text(APP)
    rng = random.Random(6)
    try:
        b = node.bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        for f in admin.create_topics([NewTopic(t, PARTS, 1) for t in ("eos-in", "eos-out")]).values():
            f.result(30)
        h = History()
        prod = Producer({"bootstrap.servers": b, "enable.idempotence": True, "linger.ms": 5})
        for i in range(INPUTS):
            v = f"in-{i}"
            h.sends.append(Send(i % PARTS, v))
            prod.produce("eos-in", v.encode(), partition=i % PARTS)
        assert prod.flush(30) == 0

        def run_app() -> subprocess.Popen[bytes]:
            return subprocess.Popen([sys.executable, str(app_path), b, str(PARTS)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        for _ in range(6):
            app = run_app()
            time.sleep(rng.uniform(1.5, 4.0))
            app.kill()
            app.wait()
        app = run_app()
        assert app.wait(180) == 0

        c = Consumer({"bootstrap.servers": b, "group.id": "eos-check", "enable.auto.commit": False,
                      "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
        ends = {p: c.get_watermark_offsets(TopicPartition("eos-out", p), timeout=30)[1]
                for p in range(PARTS)}
        c.assign([TopicPartition("eos-out", p, 0) for p in range(PARTS)])
        out = []
        idle = 0
        while idle < 10:
            m = c.poll(0.3)
            if m is None:
                idle += 1
                continue
            if m.error():
                continue
            idle = 0
            out.append((m.partition(), m.offset(), m.value().decode().removeprefix("out:")))
        group = Consumer({"bootstrap.servers": b, "group.id": "eos", "enable.auto.commit": False})
        committed = group.committed([TopicPartition("eos-in", p) for p in range(PARTS)], timeout=30)
        group.close()
        in_ends = [c.get_watermark_offsets(TopicPartition("eos-in", p), timeout=30)[1]
                   for p in range(PARTS)]
        c.close()
        assert ends
        h.final = out
        assert check(h) == {}
        assert sorted(v for *_, v in out) == sorted(s.value for s in h.sends)
        assert [tp.offset for tp in committed] == in_ends
    finally:
        node.stop() if node.alive() else node.kill9()
