"""`odradek consume` reads 3M records of 100 B: every one arrives, in order per partition.

This is the read that used to stall in librdkafka's fetch queue backoff (issue 23). Records
are written with odradek's columnar producer (the fast way to 3M); the CLI writes one line per
record (partition, offset, value length) to a file, and the test checks that each partition's
offsets run 0, 1, 2, ... up to the node's high watermark, with no gap, repeat or reordering.
Nothing here depends on how fast it went.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.client import consumer_settings
from tests.integration.cli_support import ODRADEK, ok
from tests.support.broker import BrokerProcess

RECORDS = 3_000_000
SIZE = 100
PARTITIONS = 3
TOPIC = "three-million"


def high_watermarks(bootstrap: str) -> dict[int, int]:
    c = Consumer(consumer_settings(bootstrap, group_id="hw-3m"))
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
                for p in range(PARTITIONS)}
    finally:
        c.close()


@pytest.mark.slow
def test_consume_reads_three_million_records_in_order(broker: BrokerProcess,
                                                       tmp_path: Path) -> None:
    ok("bench", "produce", "--client", "columnar", "--topic", TOPIC, "--num-records",
       str(RECORDS), "--record-size", str(SIZE), "--partitions", str(PARTITIONS),
       bootstrap=broker.bootstrap, timeout=600)
    ends = high_watermarks(broker.bootstrap)
    assert sum(ends.values()) == RECORDS

    out = tmp_path / "records.txt"
    with out.open("wb") as sink:
        proc = subprocess.run([*ODRADEK, "consume", TOPIC, "--from-beginning", "-e",
                               "-f", "%p %o %V\\n", "-b", broker.bootstrap],
                              stdout=sink, stderr=subprocess.PIPE, timeout=1200)
    assert proc.returncode == 0, proc.stderr.decode()
    rows = np.loadtxt(out, dtype=np.int64).reshape(-1, 3)
    assert len(rows) == RECORDS
    assert (rows[:, 2] == SIZE).all()
    for p in range(PARTITIONS):
        offsets = rows[rows[:, 0] == p, 1]
        # every offset of the partition once, in the order the log holds them
        assert np.array_equal(offsets, np.arange(ends[p])), f"partition {p}"
