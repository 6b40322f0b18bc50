"""ZSTD needs Produce v7 (Kafka's ProduceRequest.validateRecords): a raw Produce v3-v6 request
carrying a ZSTD batch gets UNSUPPORTED_COMPRESSION_TYPE for its partition and nothing is
stored; the same batch on v7+ is appended and reads back."""

from __future__ import annotations

import importlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32

from odradek.protocol.records import Compression, Record, build_batch
from tests.support import requests as rq
from tests.support import wire
from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

TOPIC = "zstd-by-version"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(Path(tmp_path_factory.mktemp("zstd")) / "data")
    broker.start()
    try:
        create_topic(broker.bootstrap, TOPIC, 1)
        yield broker
    finally:
        broker.stop()


def produce(version: int, records: bytes) -> Any:
    # kio's Produce schema of that version, one partition (v3-v8 share one shape)
    mod = importlib.import_module(f"kio.schema.produce.v{version}.request")
    return mod.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=rq.TIMEOUT,
        topic_data=(mod.TopicProduceData(name=TOPIC, partition_data=(
            mod.PartitionProduceData(index=i32(0), records=records),)),))


def zstd_batch(value: bytes) -> bytes:
    return build_batch([Record(-1, int(time.time() * 1000), b"k", value)],
                       compression=Compression.ZSTD)


def end_offset(node: BrokerProcess) -> int:
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    try:
        return int(c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)[1])
    finally:
        c.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [3, 6])
def test_zstd_below_v7_is_refused(node: BrokerProcess, version: int) -> None:
    before = end_offset(node)
    with wire.Conn(node.port) as c:
        resp = c.request(produce(version, zstd_batch(b"refused" * 20)))
        (part,) = resp.responses[0].partition_responses
        assert part.error_code == ErrorCode.unsupported_compression_type, part
        assert part.base_offset == -1
        # the connection stays usable: an uncompressed batch on the same version goes in
        plain = build_batch([Record(-1, int(time.time() * 1000), b"k", b"plain")])
        resp = c.request(produce(version, plain))
        (part,) = resp.responses[0].partition_responses
        assert part.error_code == ErrorCode.none, part
        assert part.base_offset == before
    assert end_offset(node) == before + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize("version", [7, 9])
def test_zstd_from_v7_is_appended(node: BrokerProcess, version: int) -> None:
    before = end_offset(node)
    value = b"zstd-v%d-" % version * 20
    with wire.Conn(node.port) as c:
        request = (produce(version, zstd_batch(value)) if version < 9
                   else rq.produce(9, TOPIC, 0, zstd_batch(value)))
        resp = c.request(request)
        (part,) = resp.responses[0].partition_responses
        assert part.error_code == ErrorCode.none, part
        assert part.base_offset == before
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, before)])
        got = None
        deadline = time.monotonic() + 20
        while got is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got = msg
        assert got is not None and (got.offset(), got.key(), got.value()) == (before, b"k", value)
    finally:
        consumer.close()
