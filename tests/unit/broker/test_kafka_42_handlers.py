"""The Kafka 4.x versions on a real request path (no sockets): DescribeTopicPartitions'
paging and refusals, ListConfigResources v0/v1, Produce v13 by topic id.
Requests and answers go through kio, an independent codec."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.metadata.controller_requests import AlterOp, IncrementalAlterConfigsResource
from odradek.metadata.records import RESOURCE_GROUP
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import Record, build_batch
from tests.unit.broker.support import Broker

E = ErrorCode


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    b = Broker(tmp_path)
    b.create("a", 3)
    b.create("b", 2)
    yield b
    b.close()


def dtp(b: Broker, names: list[str], limit: int = 2000,
        cursor: tuple[str, int] | None = None) -> Any:
    return b.call(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": n} for n in names], "response_partition_limit": limit,
        "cursor": None if cursor is None else {"topic_name": cursor[0],
                                               "partition_index": cursor[1]}})


def rows(r: Any) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in r.topics for p in t.partitions]


def test_every_topic_in_pages(broker: Broker) -> None:
    first = dtp(broker, [], limit=2)
    assert rows(first) == [("a", 0), ("a", 1)]
    cur = first.next_cursor
    assert (cur.topic_name, cur.partition_index) == ("a", 2)
    second = dtp(broker, [], limit=2, cursor=("a", 2))
    assert rows(second) == [("a", 2), ("b", 0)]
    third = dtp(broker, [], limit=2, cursor=("b", 1))
    assert rows(third) == [("b", 1)] and third.next_cursor is None
    # a page that ends with a topic: the next starts at the next topic's partition 0
    exact = dtp(broker, [], limit=3)
    assert rows(exact) == [("a", 0), ("a", 1), ("a", 2)]
    assert (exact.next_cursor.topic_name, exact.next_cursor.partition_index) == ("b", 0)
    assert all(p.eligible_leader_replicas == () for t in exact.topics for p in t.partitions)


def test_refusals(broker: Broker) -> None:
    # the cursor's topic must be among the named ones; its partition not negative
    for names, limit, cursor in ((["a"], 5, ("b", 0)), (["a"], 5, ("a", -1)), (["a"], 0, None)):
        r = dtp(broker, names, limit, cursor)
        assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [
            ("a", E.invalid_request, ())]
    unknown = dtp(broker, ["zz", "a"])
    assert [(t.name, t.error_code) for t in unknown.topics] == [
        ("a", E.none), ("zz", E.unknown_topic_or_partition)]


def test_list_config_resources(broker: Broker) -> None:
    v0 = broker.call(ApiKey.LIST_CONFIG_RESOURCES, 0, {})
    assert (v0.error_code, v0.config_resources) == (E.none, ())  # no client-metrics resources
    broker.controller.incremental_alter_configs([IncrementalAlterConfigsResource(
        RESOURCE_GROUP, "g1", [("consumer.session.timeout.ms", AlterOp.SET, "50000")])])
    v1 = broker.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": []})
    listed = {(r.resource_type, r.resource_name) for r in v1.config_resources}
    assert {(2, "a"), (2, "b"), (4, "1"), (8, "1"), (32, "g1")} <= listed
    groups = broker.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [32]})
    assert [(r.resource_type, r.resource_name) for r in groups.config_resources] == [(32, "g1")]
    bad = broker.call(ApiKey.LIST_CONFIG_RESOURCES, 1, {"resource_types": [99]})
    assert bad.error_code == E.invalid_request


def test_produce_v13_by_topic_id(broker: Broker) -> None:
    topic_id = broker.controller.image.topics_by_name["a"].topic_id
    other = uuid.uuid4()
    r = broker.call(ApiKey.PRODUCE, 13, {
        "transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
            {"topic_id": tid, "partition_data": [
                {"index": 0, "records": build_batch([Record(-1, 0, b"k", b"v")])}]}
            for tid in (topic_id, other)]})
    assert [(t.topic_id, [(p.error_code, p.base_offset) for p in t.partition_responses])
            for t in r.responses] == [(topic_id, [(E.none, 0)]),
                                      (other, [(E.unknown_topic_id, -1)])]
    assert broker.rm.get("a", 0).log_end_offset == 1
    # OffsetCommit/OffsetFetch v10 need a group coordinator: tests/integration/test_kafka_42_apis.py
