"""`odradek bench produce|consume|e2e` against a real node, on small counts.

The perf tools print what Kafka's own tools print; these tests check the fields and that the
counts are the node's real ones, never how fast anything went.
"""

from __future__ import annotations

import re

from confluent_kafka import Consumer, TopicPartition

from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess

PRODUCER_SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.$", re.M)
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
                   "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
CONSUMER_LINE = re.compile(
    rf"^{STAMP}, {STAMP}, ([\d.]+), [\d.]+, (\d+), [\d.]+, 0, \d+, [\d.]+, [\d.]+$", re.M)
E2E = re.compile(r"^(\d+) records at [\d.]+ records/sec\nAvg latency: [\d.]+ ms\n"
                 r"Percentiles: 50th = ([\d.]+), 99th = ([\d.]+), 99\.9th = ([\d.]+)$", re.M)


def stored_records(bootstrap: str, topic: str) -> tuple[int, int]:
    """(partitions, records) of a topic, from the node's own watermarks."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "test-cli-bench"})
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        total = 0
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            total += high - low
        return len(parts), total
    finally:
        consumer.close()


def test_produce_then_consume_print_the_kafka_perf_tool_fields(broker: BrokerProcess) -> None:
    out = ok("bench", "produce", "--topic", "perf", "--num-records", "20000",
             "--record-size", "100", "--partitions", "3", bootstrap=broker.bootstrap)
    summary = PRODUCER_SUMMARY.search(out)
    assert summary, out
    assert int(summary.group(1)) == 20000
    assert stored_records(broker.bootstrap, "perf") == (3, 20000)

    out = ok("bench", "consume", "--topic", "perf", "--messages", "20000",
             bootstrap=broker.bootstrap)
    lines = out.splitlines()
    assert CONSUMER_HEADER in lines, out
    line = CONSUMER_LINE.search(out)
    assert line, out
    assert int(line.group(2)) == 20000
    # 20000 values of 100 bytes, no keys, in MiB as the Java tool counts them.
    assert float(line.group(1)) == round(20000 * 100 / (1024 * 1024), 4)


def test_produce_at_a_throughput_and_with_acks_all(broker: BrokerProcess) -> None:
    out = ok("bench", "produce", "-t", "paced", "-n", "3000", "-s", "10", "--throughput", "3000",
             "--acks", "all", "-p", "1", "-X", "linger.ms=0", bootstrap=broker.bootstrap)
    summary = PRODUCER_SUMMARY.search(out)
    assert summary and int(summary.group(1)) == 3000, out
    assert stored_records(broker.bootstrap, "paced") == (1, 3000)


def test_two_producer_and_two_consumer_processes_count_exactly(broker: BrokerProcess) -> None:
    # An odd count over 5 partitions: uneven shares for both the producers and the consumers.
    produced = 6001
    out = ok("bench", "produce", "-t", "split", "-n", str(produced), "-p", "5", "-s", "37",
             "--processes", "2", bootstrap=broker.bootstrap)
    assert "# 2 producer processes" in out, out
    summary = PRODUCER_SUMMARY.search(out)
    assert summary and int(summary.group(1)) == produced, out
    assert stored_records(broker.bootstrap, "split") == (5, produced)

    out = ok("bench", "consume", "-t", "split", "-n", str(produced), "--processes", "2",
             bootstrap=broker.bootstrap)
    assert "# 2 consumer processes" in out, out
    line = CONSUMER_LINE.search(out)
    assert line and int(line.group(2)) == produced, out
    assert float(line.group(1)) == round(produced * 37 / (1024 * 1024), 4)

    # Fewer than stored: the processes together stop at exactly the number asked for.
    out = ok("bench", "consume", "-t", "split", "-n", "4999", "--processes", "3", "--batch", "64",
             bootstrap=broker.bootstrap)
    line = CONSUMER_LINE.search(out)
    assert line and int(line.group(2)) == 4999, out
    assert float(line.group(1)) == round(4999 * 37 / (1024 * 1024), 4)


def test_consume_fails_when_fewer_records_than_asked(broker: BrokerProcess) -> None:
    ok("bench", "produce", "-t", "short", "-n", "100", "-p", "1", bootstrap=broker.bootstrap)
    res = odradek("bench", "consume", "-t", "short", "-n", "200", "--timeout", "1",
                  bootstrap=broker.bootstrap)
    assert res.returncode == 1
    line = CONSUMER_LINE.search(res.stdout)
    assert line and int(line.group(2)) == 100, res.stdout


def test_e2e_measures_every_record_after_warm_up(broker: BrokerProcess) -> None:
    out = ok("bench", "e2e", "-t", "latency", "--rate", "2000", "--seconds", "1",
             "--partitions", "2", bootstrap=broker.bootstrap)
    m = E2E.search(out)
    assert m, out
    # The client settings that shape the latency are printed first, with the acks asked for.
    settings = out.splitlines()[0]
    assert settings.startswith("# producer: acks=1, linger.ms=1; consumer: fetch.wait.max.ms=10, "
                               "fetch.min.bytes=1;"), out
    measured = int(m.group(1))
    p50, p99, p999 = (float(m.group(i)) for i in (2, 3, 4))
    assert measured > 0
    assert 0 <= p50 <= p99 <= p999
    # Warm-up records are produced too, but not measured.
    partitions, stored = stored_records(broker.bootstrap, "latency")
    assert partitions == 2
    assert stored > measured

