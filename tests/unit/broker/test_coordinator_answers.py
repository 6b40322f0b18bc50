"""WriteTxnMarkers through the dispatcher of a real single node (markers appended, the
producer state's fencing checks), and the answers a coordinator request gets when its
writes do not reach the ISR (every API of COORDINATOR_WRITES, each item carrying the
error)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from odradek.broker.apis import COORDINATOR_WRITES
from odradek.broker.handlers.coordinator_errors import not_replicated_answer
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.headers import parse_request_header
from odradek.protocol.messages import decode_response
from odradek.protocol.records import Record, build_batch, iter_batches
from tests.unit.broker.support import Broker

E = ErrorCode


def marker(topic: str, partition: int, pid: int, epoch: int, coord: int,
           commit: bool = True) -> dict[str, Any]:
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch,
                         "transaction_result": commit, "coordinator_epoch": coord,
                         "topics": [{"name": topic, "partition_indexes": [partition]}]}]}


def errors(r: Any) -> list[ErrorCode]:
    return [ErrorCode(p.error_code) for m in r.markers for t in m.topics for p in t.partitions]


def test_write_txn_markers(tmp_path: Path) -> None:
    b = Broker(tmp_path)
    try:
        b.create("d")
        part = b.rm.get("d", 0)
        part.log.producer_state.mark_verified(42, 0)
        batch = build_batch([Record(-1, int(time.time() * 1000), None, b"v")], producer_id=42,
                            producer_epoch=0, base_sequence=0, transactional=True)
        assert b.rm.append("d", 0, memoryview(batch), -1).error == E.none
        assert part.last_stable_offset == 0
        r = b.call(ApiKey.WRITE_TXN_MARKERS, 1, marker("d", 0, 42, 0, 3))
        assert errors(r) == [E.none]
        assert part.last_stable_offset == part.log_end_offset == 2  # the commit ended it
        data = part.log.read_bytes(part.log.read(0, 1 << 20).region)
        assert [h.is_control for h, _ in iter_batches(data)] == [False, True]
        # a coordinator older than the last marker's, and an older producer epoch
        assert errors(b.call(ApiKey.WRITE_TXN_MARKERS, 1, marker("d", 0, 42, 0, 2))) == [
            E.transaction_coordinator_fenced]
        part.log.producer_state.producers[42].epoch = 1
        assert errors(b.call(ApiKey.WRITE_TXN_MARKERS, 1, marker("d", 0, 42, 0, 3))) == [
            E.invalid_producer_epoch]
        assert errors(b.call(ApiKey.WRITE_TXN_MARKERS, 1, marker("nowhere", 0, 42, 1, 3))) == [
            E.unknown_topic_or_partition]
        assert part.log_end_offset == 2  # nothing more appended
    finally:
        b.close()


# minimal requests of every coordinator-writing API, at a version each
REQUESTS: dict[ApiKey, tuple[int, dict[str, Any]]] = {
    ApiKey.JOIN_GROUP: (9, {"group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
                            "member_id": "m", "group_instance_id": None, "protocol_type": "c",
                            "protocols": [], "reason": None}),
    ApiKey.SYNC_GROUP: (5, {"group_id": "g", "generation_id": 1, "member_id": "m",
                            "group_instance_id": None, "protocol_type": None,
                            "protocol_name": None, "assignments": []}),
    ApiKey.HEARTBEAT: (4, {"group_id": "g", "generation_id": 1, "member_id": "m",
                           "group_instance_id": None}),
    ApiKey.LEAVE_GROUP: (5, {"group_id": "g", "members": []}),
    ApiKey.OFFSET_COMMIT: (8, {"group_id": "g", "generation_id_or_member_epoch": -1,
                               "member_id": "", "group_instance_id": None, "topics": [
                                   {"name": "d", "partitions": [
                                       {"partition_index": 0, "committed_offset": 1,
                                        "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]}]}),
    ApiKey.DELETE_GROUPS: (2, {"groups_names": ["g", "h"]}),
    ApiKey.OFFSET_DELETE: (0, {"group_id": "g", "topics": []}),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, {
        "group_id": "g", "member_id": "m", "member_epoch": 0, "instance_id": None,
        "rack_id": None, "rebalance_timeout": 1000, "subscribed_topic_names": None,
        "server_assignor": None, "topic_partitions": None}),
    ApiKey.INIT_PRODUCER_ID: (4, {"transactional_id": "t", "transaction_timeout": 1000,
                                  "producer_id": -1, "producer_epoch": -1}),
    ApiKey.ADD_PARTITIONS_TO_TXN: (3, {"v3_and_below_transactional_id": "t",
                                       "v3_and_below_producer_id": 1,
                                       "v3_and_below_producer_epoch": 0,
                                       "v3_and_below_topics": [
                                           {"name": "d", "partitions": [0, 1]}]}),
    ApiKey.ADD_OFFSETS_TO_TXN: (3, {"transactional_id": "t", "producer_id": 1,
                                    "producer_epoch": 0, "group_id": "g"}),
    ApiKey.END_TXN: (3, {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
                         "committed": True}),
    ApiKey.TXN_OFFSET_COMMIT: (3, {
        "transactional_id": "t", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
        "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": [
            {"name": "d", "partitions": [{"partition_index": 2, "committed_offset": 1,
                                          "committed_leader_epoch": -1,
                                          "committed_metadata": None}]}]}),
    ApiKey.SHARE_GROUP_HEARTBEAT: (1, {"group_id": "g", "member_id": "m", "member_epoch": 0,
                                       "rack_id": None, "subscribed_topic_names": ["d"]}),
    ApiKey.SHARE_FETCH: (1, {"group_id": "g", "member_id": "m", "share_session_epoch": 1,
                             "max_wait": 0, "min_bytes": 1, "max_bytes": 1000,
                             "max_records": 10, "batch_size": 10, "topics": [],
                             "forgotten_topics_data": []}),
    ApiKey.SHARE_ACKNOWLEDGE: (1, {"group_id": "g", "member_id": "m",
                                   "share_session_epoch": 1, "topics": []}),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (0, {"group_id": "g", "topics": [
        {"topic_name": "d", "partitions": [{"partition_index": 0, "start_offset": 1}]}]}),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (0, {"group_id": "g", "topics": [
        {"topic_name": "d"}]}),
}


def _codes(value: Any) -> list[int]:
    """Every error code in a response entity, depth first."""
    out = []
    for name in getattr(value, "__dataclass_fields__", {}):
        v = getattr(value, name)
        if name.endswith("error_code"):
            out.append(int(v))
        elif isinstance(v, tuple):
            for item in v:
                out.extend(_codes(item))
        elif hasattr(v, "__dataclass_fields__"):
            out.extend(_codes(v))
    return out


def test_every_coordinator_write_api_has_an_answer() -> None:
    assert set(REQUESTS) == set(COORDINATOR_WRITES)


@pytest.mark.parametrize("api", sorted(REQUESTS), ids=lambda a: ApiKey(a).name)
@pytest.mark.parametrize("code", [E.not_coordinator, E.coordinator_not_available])
def test_not_replicated_answers(tmp_path: Path, api: ApiKey, code: ErrorCode) -> None:
    version, values = REQUESTS[api]
    b = Broker(tmp_path)
    try:
        frame = memoryview(b.frame(api, version, b.request(api, version, values)))
        answer = not_replicated_answer(parse_request_header(frame), frame, code)
    finally:
        b.close()
    assert answer is not None
    header_version, parts = answer
    assert header_version == response_header_version(api, version)
    r = decode_response(api, version, b"".join(bytes(p) for p in parts))
    codes = _codes(r)
    assert codes and set(codes) == {int(code)}, (api, codes)
