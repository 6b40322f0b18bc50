"""The CLI's consumers run with the shipped fetch settings, and `-X` wins: read from
librdkafka's own report of its configuration (`-X debug=conf`), against a real node."""

from __future__ import annotations

import json
import re

from odradek.client.consumer_settings import SHIPPED
from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess


def reported(stderr: str) -> dict[str, str]:
    conf = dict(re.findall(r"\]:\s+([a-z.]+) = (\S+)", stderr))
    assert conf, stderr
    return conf


def librdkafka_name(key: str) -> str:
    return "fetch.message.max.bytes" if key == "max.partition.fetch.bytes" else key


def test_consume_applies_shipped_settings_and_x_wins(broker: BrokerProcess) -> None:
    ok("topic", "create", "cs", "-p", "1", bootstrap=broker.bootstrap)
    res = odradek("consume", "cs", "-e", "-X", "debug=conf", bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    conf = reported(res.stderr)
    for key, value in SHIPPED.items():
        assert conf[librdkafka_name(key)] == str(value), key
    res = odradek("consume", "cs", "-e", "-X", "debug=conf", "-X", "fetch.queue.backoff.ms=250",
                  bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    assert reported(res.stderr)["fetch.queue.backoff.ms"] == "250"


def test_bench_consume_librdkafka_defaults_switch(broker: BrokerProcess) -> None:
    ok("bench", "produce", "-t", "bs", "-n", "100", "-p", "1", bootstrap=broker.bootstrap)
    res = odradek("bench", "consume", "-t", "bs", "-n", "100", "-X", "debug=conf",
                  bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    assert reported(res.stderr)["fetch.queue.backoff.ms"] == str(SHIPPED["fetch.queue.backoff.ms"])
    res = odradek("bench", "consume", "-t", "bs", "-n", "100", "--librdkafka-defaults",
                  "-X", "debug=conf", "-X", "queued.min.messages=7", bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    conf = reported(res.stderr)
    assert conf["fetch.queue.backoff.ms"] == "1000"
    assert conf["queued.min.messages"] == "7"


def _produce(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None,
                                                              list[tuple[str, bytes | None]], int]],
             ) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, key, value, headers, ts in records:
        producer.produce(topic, value, key, partition=partition, headers=headers or None,
                         timestamp=ts)
    assert producer.flush(30) == 0


def test_every_field_of_every_record_across_batches(broker: BrokerProcess) -> None:
    """`odradek consume` reads each Message through a view and writes a batch at once: every
    field (null keys and values, headers with a null value, timestamps) of 2,500 records over
    2 partitions (more than one consume() batch each) comes out, in order per partition."""
    b = broker.bootstrap
    ok("topic", "create", "fields", "-p", "2", bootstrap=b)
    records = []
    for i in range(2500):
        key = None if i % 5 == 0 else f"k{i}".encode()
        value = None if i % 7 == 0 else f"v{i}".encode()
        headers: list[tuple[str, bytes | None]] = [("n", str(i).encode()), ("nil", None)] \
            if i % 3 == 0 else []
        records.append((i % 2, key, value, headers, 1_700_000_000_000 + i))
    _produce(b, "fields", records)

    out = ok("consume", "fields", "--from-beginning", "-e",
             "-f", "%p|%o|%k|%K|%v|%V|%d|%H|%h\\n", bootstrap=b)
    want: dict[int, list[str]] = {0: [], 1: []}
    for partition, key, value, headers, ts in records:
        h = ",".join(f"{k}={(v or b'').decode()}" for k, v in headers)
        want[partition].append(
            f"{partition}|{len(want[partition])}|{(key or b'').decode()}|"
            f"{-1 if key is None else len(key)}|{(value or b'').decode()}|"
            f"{-1 if value is None else len(value)}|{ts}|{len(headers)}|{h}")
    got: dict[int, list[str]] = {0: [], 1: []}
    for line in out.splitlines():
        got[int(line.split("|")[0])].append(line)
    assert got == want

    lines = [json.loads(line) for line in ok("consume", "fields", "-p", "1", "--from-beginning",
                                             "-e", bootstrap=b).splitlines()]
    text = [(r["offset"], r["key"], r["value"], r["headers"], r["timestamp"]) for r in lines]
    assert text == [
        (n, None if k is None else k.decode(), None if v is None else v.decode(),
         [{"key": hk, "value": None if hv is None else hv.decode()} for hk, hv in h], ts)
        for n, (_, k, v, h, ts) in enumerate(r for r in records if r[0] == 1)]
    assert text[1][3] == [{"key": "n", "value": "3"}, {"key": "nil", "value": None}]


def test_group_commits_what_was_written(broker: BrokerProcess) -> None:
    """In a group, `odradek consume` stores the offset after the last record it wrote of each
    partition (once per batch): a second member of the group starts right after, so the two
    runs together print every record once (the unread partitions from the beginning)."""
    from confluent_kafka import Consumer, TopicPartition

    b = broker.bootstrap
    ok("topic", "create", "grouped", "-p", "3", bootstrap=b)
    _produce(b, "grouped", [(i % 3, None, f"r{i}".encode(), [], 1_700_000_000_000 + i)
                            for i in range(3000)])
    first = ok("consume", "grouped", "-g", "g1", "--from-beginning", "-n", "1234",
               "-f", "%p %o\\n", bootstrap=b).splitlines()
    assert len(first) == 1234
    last: dict[int, int] = {}
    for line in first:
        p, o = map(int, line.split())
        assert o == last.get(p, -1) + 1  # in order, no gap, per partition
        last[p] = o
    probe = Consumer({"bootstrap.servers": b, "group.id": "g1"})
    try:
        committed = probe.committed([TopicPartition("grouped", p) for p in range(3)], timeout=30)
    finally:
        probe.close()
    assert {tp.partition: tp.offset for tp in committed if tp.offset >= 0} == \
        {p: o + 1 for p, o in last.items()}
    # --from-beginning only for partitions the group has no offset for (none read yet)
    second = ok("consume", "grouped", "-g", "g1", "--from-beginning", "-e", "-f", "%p %o\\n",
                bootstrap=b).splitlines()
    seen = sorted(tuple(map(int, line.split())) for line in first + second)
    assert seen == sorted((p, o) for p in range(3) for o in range(1000))
