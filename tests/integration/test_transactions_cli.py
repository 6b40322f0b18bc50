"""`odradek transaction list|describe` and the LSO in `odradek topic describe`."""

from __future__ import annotations

import subprocess

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import ODRADEK, BrokerProcess


def cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ODRADEK, *args, "-b", broker.bootstrap], capture_output=True,
                          text=True, timeout=60)


def test_transaction_cli_and_lso(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("cli-tx", 2, 1)])["cli-tx"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "cli-tid"})
    p.init_transactions(30)
    empty = cli(broker, "transaction", "describe", "cli-tid")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.splitlines()[1].split()[3] == "Empty"
    p.begin_transaction()
    for i in range(4):
        p.produce("cli-tx", b"v%d" % i, partition=0)
    assert p.flush(60) == 0

    listed = cli(broker, "transaction", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == ["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"]
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("cli-tid "))
    assert row[-1] == "Ongoing"
    described = cli(broker, "transaction", "describe", "cli-tid")
    assert described.returncode == 0, described.stderr
    fields = described.stdout.splitlines()[1].split()
    assert fields[0] == "cli-tid" and fields[3] == "Ongoing" and fields[6] == "cli-tx-0"
    missing = cli(broker, "transaction", "describe", "nobody")
    assert missing.returncode == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr

    topic = cli(broker, "topic", "describe", "cli-tx")
    lines = topic.stdout.splitlines()
    assert lines[1].endswith("\tLastStableOffset: 0")  # held by the open transaction
    assert "LastStableOffset" not in lines[2]
    p.commit_transaction(30)
    topic = cli(broker, "topic", "describe", "cli-tx", "--offsets")
    lines = topic.stdout.splitlines()
    assert lines[1].endswith("\tHighWatermark: 5\tLastStableOffset: 5")
    assert lines[2].endswith("\tHighWatermark: 0\tLastStableOffset: 0")
