"""The handlers without sockets, through the dispatcher, over a real controller, logs and
replica manager: requests encoded as clients send them, responses decoded with kio."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.apis import declarations
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.unit.broker.support import Broker

E = ErrorCode
ZERO = uuid.UUID(int=0)
EARLIEST, LATEST = -2, -1


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    yield b
    b.close()


def metadata(b: Broker, names: list[str], allow_auto: bool = True) -> Any:
    return b.call(ApiKey.METADATA, 12, {
        "topics": [{"name": n, "topic_id": ZERO} for n in names],
        "allow_auto_topic_creation": allow_auto, "include_topic_authorized_operations": False})


def produce(b: Broker, topic: str, records: list[Record], acks: int = 1,
            partition: int = 0) -> Any:
    r = b.call(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": acks, "timeout": 5000,
        "topic_data": [{"name": topic, "partition_data": [
            {"index": partition, "records": build_batch(records)}]}]})
    ((t,),) = [r.responses]
    ((p,),) = [t.partition_responses]
    return p


def fetch(b: Broker, topic: str, offset: int, partition: int = 0) -> Any:
    r = b.call(ApiKey.FETCH, 12, {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [{
            "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
            "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": ""})
    assert r.error_code == E.none
    ((t,),) = [r.responses]
    ((p,),) = [t.partitions]
    return p


def values(records: bytes | None) -> list[bytes | None]:
    out: list[bytes | None] = []
    for header, batch in iter_batches(memoryview(records or b""), strict=True):
        out += [r.value for r in decode_records(header, batch)]
    return out


def list_offsets(b: Broker, topic: str, timestamp: int) -> Any:
    r = b.call(ApiKey.LIST_OFFSETS, 7, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": timestamp}]}]})
    ((t,),) = [r.topics]
    ((p,),) = [t.partitions]
    return p


def test_api_versions_advertises_exactly_the_declarations(broker: Broker) -> None:
    r = broker.call(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                             "client_software_version": "1"})
    assert r.error_code == E.none
    advertised = [(k.api_key, k.min_version, k.max_version) for k in r.api_keys]
    assert sorted(advertised) == sorted(
        (int(d.api_key), d.min_version, d.max_version) for d in declarations())


def test_metadata_auto_creates_only_when_allowed(tmp_path: Path) -> None:
    on = Broker(tmp_path / "on", **{"auto.create.topics.enable": "true"})
    try:
        refused = metadata(on, ["wanted"], allow_auto=False)
        assert [(t.name, t.error_code) for t in refused.topics] == [
            ("wanted", E.unknown_topic_or_partition)]
        created = metadata(on, ["wanted"])
        assert [(t.name, t.error_code, len(t.partitions)) for t in created.topics] == [
            ("wanted", E.none, 1)]
        assert on.rm.get("wanted", 0) is not None  # the partition followed the image
        invalid = metadata(on, ["bad name!"])
        assert [t.error_code for t in invalid.topics] == [E.invalid_topic_exception]
    finally:
        on.close()
    off = Broker(tmp_path / "off", **{"auto.create.topics.enable": "false"})
    try:
        r = metadata(off, ["wanted"])
        assert [(t.name, t.error_code) for t in r.topics] == [
            ("wanted", E.unknown_topic_or_partition)]
        assert "wanted" not in off.controller.image.topics_by_name
        assert [b.node_id for b in r.brokers] == [1] and r.controller_id == 1
    finally:
        off.close()


def test_create_topics_validation_errors(broker: Broker) -> None:
    def create(name: str, partitions: int = 1, rf: int = 1, validate_only: bool = False,
               **configs: str) -> Any:
        r = broker.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": rf,
            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": 30000, "validate_only": validate_only})
        ((t,),) = [r.topics]
        return t

    assert create("ok", 3).error_code == E.none
    assert create("ok").error_code == E.topic_already_exists
    assert create("bad/name").error_code == E.invalid_topic_exception
    assert create("zero", partitions=0).error_code == E.invalid_partitions
    assert create("rf", rf=3).error_code == E.invalid_replication_factor
    bad = create("cfg", **{"retention.ms": "soon"})
    assert bad.error_code == E.invalid_config and "retention.ms" in (bad.error_message or "")
    assert create("dry", validate_only=True).error_code == E.none
    assert set(broker.controller.image.topics_by_name) >= {"ok"}
    assert not {"zero", "rf", "cfg", "dry"} & set(broker.controller.image.topics_by_name)


def test_produce_acks_1_then_unknown_topic_and_keyless_on_compacted(broker: Broker) -> None:
    broker.create("p")
    first = produce(broker, "p", [Record(-1, 0, b"k", b"a"), Record(-1, 0, b"k", b"b")])
    assert (first.error_code, first.base_offset) == (E.none, 0)
    second = produce(broker, "p", [Record(-1, 0, b"k", b"c")])
    assert (second.error_code, second.base_offset) == (E.none, 2)
    assert broker.rm.get("p", 0).log_end_offset == 3

    missing = produce(broker, "nope", [Record(-1, 0, b"k", b"v")])
    assert missing.error_code == E.unknown_topic_or_partition
    assert "nope" not in broker.controller.image.topics_by_name

    broker.create("c", **{"cleanup.policy": "compact"})
    keyless = produce(broker, "c", [Record(-1, 0, None, b"v")])
    assert keyless.error_code == E.invalid_record
    assert broker.rm.get("c", 0).log_end_offset == 0
    keyed = produce(broker, "c", [Record(-1, 0, b"k", b"v")])
    assert (keyed.error_code, keyed.base_offset) == (E.none, 0)


def test_produce_acks_0_has_no_response(broker: Broker) -> None:
    broker.create("quiet")
    frame = broker.frame(ApiKey.PRODUCE, 9, broker.request(ApiKey.PRODUCE, 9, {
        "transactional_id": None, "acks": 0, "timeout": 5000,
        "topic_data": [{"name": "quiet", "partition_data": [
            {"index": 0, "records": build_batch([Record(-1, 0, b"k", b"v")])}]}]}))
    assert broker.raw(frame) is None
    assert broker.rm.get("quiet", 0).log_end_offset == 1


def test_fetch_empty_records_and_out_of_range(broker: Broker) -> None:
    broker.create("f")
    empty = fetch(broker, "f", 0)
    assert (empty.error_code, empty.high_watermark) == (E.none, 0)
    assert values(empty.records) == []
    produce(broker, "f", [Record(-1, 0, b"k", b"v%d" % i) for i in range(3)])
    produce(broker, "f", [Record(-1, 0, b"k", b"w")])
    full = fetch(broker, "f", 0)
    assert (full.error_code, full.high_watermark) == (E.none, 4)
    assert values(full.records) == [b"v0", b"v1", b"v2", b"w"]
    tail = fetch(broker, "f", 3)
    assert values(tail.records)[-1:] == [b"w"]
    assert fetch(broker, "f", 4).records in (None, b"")  # at the end: nothing, no error
    beyond = fetch(broker, "f", 5)
    assert beyond.error_code == E.offset_out_of_range
    unknown = fetch(broker, "gone", 0)
    assert unknown.error_code == E.unknown_topic_or_partition


def test_list_offsets_earliest_latest_and_by_timestamp(broker: Broker) -> None:
    broker.create("l")
    assert (list_offsets(broker, "l", EARLIEST).offset, list_offsets(broker, "l", LATEST).offset) \
        == (0, 0)
    produce(broker, "l", [Record(-1, 1000, b"k", b"a"), Record(-1, 2000, b"k", b"b")])
    produce(broker, "l", [Record(-1, 3000, b"k", b"c")])
    assert list_offsets(broker, "l", EARLIEST).offset == 0
    assert list_offsets(broker, "l", LATEST).offset == 3
    at = list_offsets(broker, "l", 1500)  # the first record at or after the timestamp
    assert (at.error_code, at.offset, at.timestamp) == (E.none, 1, 2000)
    exact = list_offsets(broker, "l", 3000)
    assert (exact.offset, exact.timestamp) == (2, 3000)
    after = list_offsets(broker, "l", 4000)  # none that late: offset -1
    assert (after.error_code, after.offset) == (E.none, -1)
    assert list_offsets(broker, "missing", LATEST).error_code == E.unknown_topic_or_partition
