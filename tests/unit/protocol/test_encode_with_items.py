"""encode_response_with_items: a Metadata response spliced from topics encoded one by one is
byte for byte the response kio encodes whole, at every version (the broker's Metadata cache
answers with it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.entities import build, nested_class
from odradek.protocol.apis import ApiKey
from odradek.protocol.messages import (
    decode_response,
    encode_response,
    encode_response_with_items,
    response_class,
)

VERSIONS = range(0, 14)

partitions = st.lists(st.fixed_dictionaries({
    "error_code": st.sampled_from([0, 5]), "partition_index": st.integers(0, 2**31 - 1),
    "leader_id": st.integers(-1, 2**31 - 1), "leader_epoch": st.integers(-1, 2**31 - 1),
    "replica_nodes": st.lists(st.integers(0, 2**31 - 1), max_size=3).map(tuple),
    "isr_nodes": st.lists(st.integers(0, 2**31 - 1), max_size=3).map(tuple),
    "offline_replicas": st.lists(st.integers(0, 2**31 - 1), max_size=2).map(tuple)}),
    max_size=4)
topics = st.lists(st.fixed_dictionaries({
    "error_code": st.sampled_from([0, 3]), "name": st.text("abc-._", min_size=1, max_size=20),
    "topic_id": st.uuids(), "is_internal": st.booleans(), "partitions": partitions,
    "topic_authorized_operations": st.integers(-(2**31), 2**31 - 1)}), max_size=5)


def values(topic_list: list[dict[str, object]], cluster_ops: int) -> dict[str, object]:
    return {"throttle_time": 7, "error_code": 0, "cluster_id": "c-1", "controller_id": 1,
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
            "topics": topic_list, "cluster_authorized_operations": cluster_ops}


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=8, deadline=None)
@given(topic_list=topics, cluster_ops=st.integers(-(2**31), 2**31 - 1))
def test_spliced_metadata_response_is_the_whole_encoding(
        version: int, topic_list: list[dict[str, object]], cluster_ops: int) -> None:
    cls = response_class(ApiKey.METADATA, version)
    whole = encode_response(build(cls, values(topic_list, cluster_ops)))
    items = [encode_response(build(nested_class(cls, "topics"), t)) for t in topic_list]
    entity = build(cls, values([], cluster_ops))
    spliced = encode_response_with_items(entity, "topics", items)
    assert spliced == whole
    assert len(decode_response(ApiKey.METADATA, version, spliced).topics) == len(topic_list)


def test_a_field_followed_by_a_variable_size_one_is_refused() -> None:
    # brokers comes before cluster_id (a string): its elements cannot be spliced
    cls = response_class(ApiKey.METADATA, 12)
    entity = build(cls, values([], 0))
    with pytest.raises(ValueError, match="brokers"):
        encode_response_with_items(entity, "brokers", [])
