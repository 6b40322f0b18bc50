"""`odradek produce` and `odradek consume` against a real node."""

from __future__ import annotations

import json
import subprocess
import time
from collections import defaultdict

import pytest

from tests.integration.cli_support import ODRADEK, odradek, ok
from tests.support.broker import BrokerProcess


def consume_json(topic: str, bootstrap: str, *args: str) -> list[dict[str, object]]:
    out = ok("consume", topic, *args, bootstrap=bootstrap)
    return [json.loads(line) for line in out.splitlines()]


def test_keys_and_headers_round_trip_as_json(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "cli-pc", "-p", "3", bootstrap=b)
    keys = [f"user-{i % 7}" for i in range(200)]
    lines = "".join(f"{k}:value {i}: with colon\n" for i, k in enumerate(keys))
    ok("produce", "cli-pc", "--key-separator", ":", "--header", "app=cli", "-H", "empty=",
       "--acks", "1", input=lines, bootstrap=b)

    records = consume_json("cli-pc", b, "--from-beginning", "-n", "200")
    assert len(records) == 200
    assert {r["topic"] for r in records} == {"cli-pc"}
    assert all(r["headers"] == [{"key": "app", "value": "cli"}, {"key": "empty", "value": ""}]
               for r in records)
    by_value = {r["value"]: r for r in records}
    assert set(by_value) == {f"value {i}: with colon" for i in range(200)}
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    offsets: dict[int, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        rec = by_value[f"value {i}: with colon"]
        assert rec["key"] == key
        assert isinstance(rec["timestamp"], int) and rec["timestamp"] > 0
        partitions_of_key[key].add(rec["partition"])  # type: ignore[arg-type]
    for rec in records:
        offsets[rec["partition"]].append(rec["offset"])  # type: ignore[index, arg-type]
    # One key, one partition; per partition, offsets in order and contiguous from 0.
    assert all(len(ps) == 1 for ps in partitions_of_key.values())
    for offs in offsets.values():
        assert offs == list(range(len(offs)))
    # Within a partition, records keep the order they were produced in.
    for p in offsets:
        values = [int(str(r["value"]).split()[1].rstrip(":")) for r in records
                  if r["partition"] == p]
        assert values == sorted(values)


def test_format_partition_offset_and_exit_at_end(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "cli-fmt", "-p", "2", bootstrap=b)
    ok("produce", "cli-fmt", "-p", "1", "-k", "\\t", "-H", "h1=x", "-H", "h2=y",
       input="a\tone\nb\ttwo\nc\tthree\n", bootstrap=b)
    ok("produce", "cli-fmt", "-p", "0", input="zero\n", bootstrap=b)

    out = ok("consume", "cli-fmt", "-p", "1", "--offset", "oldest", "-e",
             "--format", "%t|%p|%o|%k=%v|%K/%V|%h|%H\\n", bootstrap=b)
    assert out.splitlines() == [
        "cli-fmt|1|0|a=one|1/3|h1=x,h2=y|2",
        "cli-fmt|1|1|b=two|1/3|h1=x,h2=y|2",
        "cli-fmt|1|2|c=three|1/5|h1=x,h2=y|2",
    ]
    # An exact start offset, and -N counting back from the end.
    assert ok("consume", "cli-fmt", "-p", "1", "-o", "2", "-e", "-f", "%v\\n",
              bootstrap=b) == "three\n"
    assert ok("consume", "cli-fmt", "-p", "1", "-o", "-2", "-e", "-f", "%v\\n",
              bootstrap=b) == "two\nthree\n"
    # Without -p every partition is read; -e stops at the end of all of them.
    out = ok("consume", "cli-fmt", "--from-beginning", "-e", "-f", "%p:%v %h{[%k]}\\n",
             bootstrap=b)
    assert sorted(out.splitlines()) == ["0:zero ", "1:one [h1][h2]", "1:three [h1][h2]",
                                        "1:two [h1][h2]"]
    # The timestamp of a record, and starting from a timestamp.
    first = consume_json("cli-fmt", b, "-p", "1", "--from-beginning", "-n", "1")[0]
    ts = int(first["timestamp"])  # type: ignore[call-overload]
    out = ok("consume", "cli-fmt", "-p", "1", "-o", f"@{ts}", "-n", "1", "-f", "%d %v", bootstrap=b)
    assert out == f"{ts} one"


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_produce(shared_broker: BrokerProcess, codec: str) -> None:
    b = shared_broker.bootstrap
    topic = f"cli-{codec}"
    ok("topic", "create", topic, "-p", "1", bootstrap=b)
    lines = [f"{codec} record {i} " + "x" * (i % 50) for i in range(500)]
    ok("produce", topic, "--compression", codec, input="\n".join(lines) + "\n", bootstrap=b)
    out = ok("consume", topic, "--from-beginning", "-n", "500", "-f", "%o %v\\n", bootstrap=b)
    assert out.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


def test_follow_mode_sees_new_records(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "cli-follow", "-p", "1", bootstrap=b)
    ok("produce", "cli-follow", input="old\n", bootstrap=b)
    # Default start is the end, as kafka-console-consumer: "old" is not shown.
    follower = subprocess.Popen([*ODRADEK, "consume", "cli-follow", "-n", "2", "-f", "%v\\n",
                                 "-b", b], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Keep producing until the follower, once assigned, has seen two new records.
        for i in range(600):
            ok("produce", "cli-follow", input=f"new{i}\n", bootstrap=b)
            if follower.poll() is not None:
                break
            time.sleep(0.1)
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err.decode()
    lines = out.decode().splitlines()
    assert len(lines) == 2
    assert all(line.startswith("new") for line in lines)


def test_bad_input_and_missing_topics(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "cli-bad", "-p", "1", bootstrap=b)
    res = odradek("produce", "cli-bad", "--key-separator", ":", input="k:v\nnoseparator\n",
                  bootstrap=b)
    assert res.returncode != 0
    assert "line 2" in res.stderr
    # The line before the bad one was delivered.
    assert ok("consume", "cli-bad", "--from-beginning", "-e", "-f", "%k=%v\\n",
              bootstrap=b) == "k=v\n"

    missing = odradek("consume", "cli-no-such-topic", "-e", bootstrap=b)
    assert missing.returncode != 0
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr

    no_partition = odradek("consume", "cli-bad", "-p", "7", "-e", bootstrap=b)
    assert no_partition.returncode != 0
    assert "partition 7" in no_partition.stderr

    bad_format = odradek("consume", "cli-bad", "-f", "%q", bootstrap=b)
    assert bad_format.returncode == 2
    assert "%q" in bad_format.stderr

    bad_partition = odradek("produce", "cli-bad", "-p", "9", "-X", "message.timeout.ms=3000",
                            input="x\n", bootstrap=b)
    assert bad_partition.returncode != 0
    assert "Error:" in bad_partition.stderr


def test_produce_fails_when_the_node_is_unreachable() -> None:
    res = odradek("produce", "t", "-X", "message.timeout.ms=1000", "--timeout", "10",
                  input="x\n", bootstrap="127.0.0.1:1")
    assert res.returncode != 0
    assert "Error:" in res.stderr
