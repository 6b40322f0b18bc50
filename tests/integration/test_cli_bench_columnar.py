"""`odradek bench consume --client columnar` counts exactly what was produced.

The columnar client (odradek's own Fetch client decoding batches into numpy columns) must count
every record once and key + value bytes as kafka-consumer-perf-test does (null counts 0),
in one process and with the partitions split between processes. Expected counts come from
what this test produced, never from the tool.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from odradek.perf import results, runs
from tests.integration.cli_support import odradek, ok
from tests.integration.test_cli_bench import CONSUMER_HEADER, CONSUMER_LINE
from tests.support.broker import BrokerProcess

TOPIC = "columnar"
PARTITIONS = 5
RECORDS = 7001


@pytest.fixture(scope="module")
def produced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, int]]:
    """A node holding RECORDS records of mixed key/value sizes (some null), over several
    batches per partition and two compression codecs; returns it and the key + value bytes."""
    node = BrokerProcess(tmp_path_factory.mktemp("columnar") / "data")
    node.start()
    ok("topic", "create", TOPIC, "--partitions", str(PARTITIONS), bootstrap=node.bootstrap)
    rng = random.Random(20261122)
    nbytes = 0
    for codec, count in (("none", RECORDS // 2), ("lz4", RECORDS - RECORDS // 2)):
        producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5,
                             "batch.num.messages": 500, "compression.type": codec})
        for i in range(count):
            key = None if i % 7 == 0 else rng.randbytes(rng.randrange(0, 40))
            value = None if i % 11 == 0 else rng.randbytes(rng.randrange(0, 300))
            nbytes += len(key or b"") + len(value or b"")
            producer.produce(TOPIC, value, key, partition=rng.randrange(PARTITIONS))
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
    try:
        yield node, nbytes
    finally:
        node.stop()


@pytest.mark.parametrize("processes", [1, 2])
def test_columnar_counts_every_record_and_byte(produced: tuple[BrokerProcess, int],
                                               processes: int) -> None:
    node, nbytes = produced
    result = runs.run_consumer(node.bootstrap, TOPIC, RECORDS, timeout_s=10, out=None,
                               processes=processes, client=results.COLUMNAR)
    assert (result.records, result.bytes, result.errors) == (RECORDS, nbytes, 0)
    assert result.cpu_seconds > 0

    out = ok("bench", "consume", "-t", TOPIC, "-n", str(RECORDS), "--client", "columnar",
             "--processes", str(processes), bootstrap=node.bootstrap)
    assert "# client: columnar" in out and "not confluent-kafka" in out, out
    assert CONSUMER_HEADER in out.splitlines(), out
    line = CONSUMER_LINE.search(out)
    assert line, out
    assert int(line.group(2)) == RECORDS
    assert float(line.group(1)) == round(nbytes / (1024 * 1024), 4)


def test_columnar_stops_at_the_number_asked_for(produced: tuple[BrokerProcess, int]) -> None:
    node, _ = produced
    for processes in (1, 2):
        result = runs.run_consumer(node.bootstrap, TOPIC, RECORDS - 1234, timeout_s=10,
                                   out=None, processes=processes, client=results.COLUMNAR)
        assert result.records == RECORDS - 1234


def test_columnar_fails_when_fewer_records_than_asked(produced: tuple[BrokerProcess, int]) -> None:
    node, _ = produced
    res = odradek("bench", "consume", "-t", TOPIC, "-n", str(RECORDS + 1), "--client",
                  "columnar", "--timeout", "1", bootstrap=node.bootstrap)
    assert res.returncode == 1, res.stdout + res.stderr
    line = CONSUMER_LINE.search(res.stdout)
    assert line and int(line.group(2)) == RECORDS, res.stdout


def test_unknown_client_is_refused(produced: tuple[BrokerProcess, int]) -> None:
    node, _ = produced
    res = odradek("bench", "consume", "-t", TOPIC, "--client", "nope", bootstrap=node.bootstrap)
    assert res.returncode == 1
    assert "--client must be one of" in res.stderr
