"""The answer to a coordinator request whose writes did not reach the ISR.

A group or transaction coordinator request is acknowledged only once its records are
replicated (CoordinatorRuntime.durably). When they are not (the leadership of the
coordinator's partition moved, min.insync.replicas failed, the ISR did not catch up in
time) Kafka answers with a retriable coordinator error instead: NOT_COORDINATOR when the
partition is no longer led here (the client looks the coordinator up again),
COORDINATOR_NOT_AVAILABLE otherwise (it retries). This module builds that answer for each
API whose handler writes, with every item of the request (partition, group) carrying the
error, as the handler itself would have answered it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from odradek.broker.handlers.common import Response, decode, respond
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode


def _partitions(topics: Any, code: ErrorCode, field: str = "error_code") -> list[dict[str, Any]]:
    return [{"name": t.name, "partitions": [
        {"partition_index": int(getattr(p, "partition_index", p)), field: code}
        for p in t.partitions]} for t in topics]


def _join(req: Any, code: ErrorCode) -> dict[str, Any]:
    return {"error_code": code, "generation_id": -1, "protocol_type": None,
            "protocol_name": None, "leader": "", "skip_assignment": False,
            "member_id": req.member_id, "members": []}


def _add_partitions(req: Any, code: ErrorCode) -> dict[str, Any]:
    if not hasattr(req, "transactions"):  # v0-3: one transaction, per-partition results
        return {"results_by_topic_v3_and_below": [
            {"name": t.name, "results_by_partition": [
                {"partition_index": int(p), "partition_error_code": code}
                for p in t.partitions]} for t in req.v3_and_below_topics]}
    return {"error_code": E.none, "results_by_transaction": [
        {"transactional_id": t.transactional_id, "topic_results": [
            {"name": tp.name, "results_by_partition": [
                {"partition_index": int(p), "partition_error_code": code}
                for p in tp.partitions]} for tp in t.topics]} for t in req.transactions]}


_ANSWERS: dict[int, Callable[[Any, ErrorCode], dict[str, Any]]] = {
    ApiKey.JOIN_GROUP: _join,
    ApiKey.SYNC_GROUP: lambda req, code: {"error_code": code, "protocol_type": None,
                                          "protocol_name": None, "assignment": b""},
    ApiKey.HEARTBEAT: lambda req, code: {"error_code": code},
    ApiKey.LEAVE_GROUP: lambda req, code: {"error_code": code, "members": []},
    ApiKey.OFFSET_COMMIT: lambda req, code: {"topics": _partitions(req.topics, code)},
    ApiKey.DELETE_GROUPS: lambda req, code: {"results": [
        {"group_id": g, "error_code": code} for g in req.groups_names]},
    ApiKey.OFFSET_DELETE: lambda req, code: {"error_code": code, "topics": []},
    ApiKey.CONSUMER_GROUP_HEARTBEAT: lambda req, code: {
        "error_code": code, "error_message": None, "member_id": None, "member_epoch": -1,
        "heartbeat_interval": 0, "assignment": None},
    ApiKey.INIT_PRODUCER_ID: lambda req, code: {"error_code": code, "producer_id": -1,
                                                "producer_epoch": -1},
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions,
    ApiKey.ADD_OFFSETS_TO_TXN: lambda req, code: {"error_code": code},
    ApiKey.END_TXN: lambda req, code: {"error_code": code, "producer_id": -1,
                                       "producer_epoch": -1},
    ApiKey.TXN_OFFSET_COMMIT: lambda req, code: {"topics": _partitions(req.topics, code)},
    # share groups (issue 20): their __share_group_state writes
    ApiKey.SHARE_GROUP_HEARTBEAT: lambda req, code: {
        "error_code": code, "error_message": None, "member_id": req.member_id,
        "member_epoch": -1, "heartbeat_interval": 0, "assignment": None},
    ApiKey.SHARE_FETCH: lambda req, code: {
        "error_code": code, "error_message": None, "acquisition_lock_timeout": 0,
        "responses": [], "node_endpoints": []},
    ApiKey.SHARE_ACKNOWLEDGE: lambda req, code: {
        "error_code": code, "error_message": None, "acquisition_lock_timeout": 0,
        "responses": [], "node_endpoints": []},
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: lambda req, code: {
        "error_code": code, "error_message": None, "responses": []},
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: lambda req, code: {
        "error_code": code, "error_message": None, "responses": []},
}


def not_replicated_answer(header: Any, frame: memoryview, code: ErrorCode) -> Response | None:
    """The request's answer with `code` everywhere; None for an API not listed here."""
    answer = _ANSWERS.get(header.api_key)
    if answer is None:
        return None
    return respond(header, {"throttle_time": 0, **answer(decode(header, frame), code)})
