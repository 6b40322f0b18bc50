"""kcat (librdkafka 2.0.x, as Debian ships it) against a live node: 100k lines per codec, back.

kcat has no admin API: the topic is created with confluent-kafka's AdminClient. kcat gives no
per-record delivery report, so placement is checked against librdkafka's default partitioner
(consistent_random: crc32(key) mod partitions) and same-key-same-partition.
"""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support import dataset
from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

N = 100_000
PARTITIONS = 6
HEADERS = [("app", "odradek-tests"), ("empty", ""), ("dup", "1"), ("dup", "2")]


def line(i: int) -> str:
    return f"k{i % 3001}:{i}|{'x' * (i % 50)}{'yz' * (i % 13)}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    n = BrokerProcess(tmp_path_factory.mktemp("kcat") / "data")
    n.start()
    yield n
    assert n.stop() == 0, n.log()


def test_metadata_listing(node: BrokerProcess) -> None:
    create_topic(node.bootstrap, "kcat-listing", PARTITIONS)
    out = subprocess.run(["kcat", "-b", node.bootstrap, "-L", "-J", "-t", "kcat-listing"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    md = json.loads(out.stdout)
    (topic,) = md["topics"]
    assert topic["topic"] == "kcat-listing"
    assert sorted(p["partition"] for p in topic["partitions"]) == list(range(PARTITIONS))
    assert all(p["leader"] == md["brokers"][0]["id"] for p in topic["partitions"])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("codec", dataset.CODECS)
def test_round_trip(node: BrokerProcess, codec: str, tmp_path: Path) -> None:
    topic = f"kcat-{codec}"
    create_topic(node.bootstrap, topic, PARTITIONS)
    src = tmp_path / "in.txt"
    src.write_text("".join(line(i) + "\n" for i in range(N)))

    header_args = [a for k, v in HEADERS for a in ("-H", f"{k}={v}")]
    produce = subprocess.run(["kcat", "-b", node.bootstrap, "-P", "-t", topic, "-K:", "-z", codec,
                              *header_args, "-X", "linger.ms=20", "-l", str(src)],
                             capture_output=True, text=True, timeout=240)
    assert produce.returncode == 0, produce.stderr
    assert "error" not in produce.stderr.lower(), produce.stderr

    consume = subprocess.run(["kcat", "-b", node.bootstrap, "-C", "-t", topic, "-o", "beginning",
                              "-e", "-J", "-q", "-X", "fetch.max.bytes=52428800"],
                             capture_output=True, text=True, timeout=240)
    assert consume.returncode == 0, consume.stderr
    records = [json.loads(x) for x in consume.stdout.splitlines() if x.strip()]

    by_partition: dict[int, list[dict]] = defaultdict(list)
    seen: set[int] = set()
    partition_of_key: dict[str, int] = {}
    for r in records:
        k, v = line_parts(r)
        i = int(v.split("|", 1)[0])
        assert i not in seen, f"line {i} consumed twice"
        seen.add(i)
        assert f"{k}:{v}" == line(i), f"line {i}: {k}:{v} != {line(i)}"
        assert r["headers"] == [x for kv in HEADERS for x in kv], r["headers"]
        p = r["partition"]
        assert partition_of_key.setdefault(k, p) == p, f"key {k} on two partitions"
        assert p == dataset.librdkafka_partition(k.encode(), PARTITIONS), f"key {k} on {p}"
        by_partition[p].append(r)
    assert seen == set(range(N)), f"{N - len(seen)} lines missing"
    for p, rs in by_partition.items():
        assert [r["offset"] for r in rs] == list(range(len(rs))), f"partition {p}: offsets"
        order = [int(r["payload"].split("|", 1)[0]) for r in rs]
        assert order == sorted(order), f"partition {p}: lines out of order"
    assert node.alive()


def line_parts(r: dict) -> tuple[str, str]:
    assert r["key"] is not None and r["payload"] is not None, r
    return r["key"], r["payload"]
