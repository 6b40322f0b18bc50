"""The KRaft APIs of the controller listener: Vote, BeginQuorumEpoch, EndQuorumEpoch,
FetchSnapshot, DescribeQuorum, and a Fetch of `__cluster_metadata` (`handle_metadata_fetch`,
which the Fetch handler calls when the request names the metadata topic).

Each needs ClusterAction on the cluster (DescribeQuorum: Describe), as Kafka's
ControllerApis, then decodes the request, checks what the quorum does not (cluster id, the one partition
`__cluster_metadata-0`, the voter addressed: `metadata.raft.wire`) and hands the message to
the node's quorum (`ctx.quorum`, a `KRaftQuorum`), whose answer it encodes for the request's
version. A Fetch may wait there: the leader's long poll.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from odradek.broker.authz import cluster_allowed
from odradek.broker.handlers.common import Response, decode, respond
from odradek.broker.refusals import note
from odradek.metadata.acls import AclOperation
from odradek.metadata.raft.wire import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    WireError,
    request_body,
    response_entity,
)
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

__all__ = [
    "VERSIONS",
    "handle_begin_quorum_epoch",
    "handle_describe_quorum",
    "handle_end_quorum_epoch",
    "handle_fetch_snapshot",
    "handle_metadata_fetch",
    "handle_vote",
    "is_metadata_fetch",
]

# What Kafka 4's raft client sends (the latest of each); DescribeQuorum for every tool.
VERSIONS = (
    ApiVersionRange(ApiKey.VOTE, 2, 2),
    ApiVersionRange(ApiKey.BEGIN_QUORUM_EPOCH, 1, 1),
    ApiVersionRange(ApiKey.END_QUORUM_EPOCH, 1, 1),
    ApiVersionRange(ApiKey.DESCRIBE_QUORUM, 0, 2),
    ApiVersionRange(ApiKey.FETCH_SNAPSHOT, 1, 1),
)
# the Fetch versions a metadata fetch is answered at (topic ids from v13; Kafka 4 sends 17)
METADATA_FETCH_VERSIONS = (13, 17)


def _values(x: Any) -> Any:
    """A kio entity as the plain values `respond` builds any version from."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _values(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, tuple):
        return [_values(i) for i in x]
    return x


async def _raft(ctx: Any, header: Any, req: Any) -> Response:
    quorum = ctx.quorum
    try:
        # issue 16: only the cluster's own nodes (ClusterAction, as Kafka's ControllerApis)
        if not cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION):
            raise WireError(ErrorCode.cluster_authorization_failed,
                            "the principal lacks ClusterAction on the cluster")
        src, body = request_body(req, quorum.node_id, quorum.cluster_id)
    except WireError as err:
        note(header, int(err.code), str(err))
        return respond(header, _values(response_entity(None, req, err)))
    answer = await quorum.handle_request(src, body)
    return respond(header, _values(response_entity(answer, req)))


def handle_vote(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _raft(ctx, header, decode(header, frame))


def handle_begin_quorum_epoch(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _raft(ctx, header, decode(header, frame))


def handle_end_quorum_epoch(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _raft(ctx, header, decode(header, frame))


def handle_fetch_snapshot(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _raft(ctx, header, decode(header, frame))


def is_metadata_fetch(request: Any) -> bool:
    """A decoded Fetch request for `__cluster_metadata` (by topic id, or name before v13)."""
    for topic in getattr(request, "topics", ()):
        if getattr(topic, "topic_id", None) == METADATA_TOPIC_ID:
            return True
        if getattr(topic, "topic", None) == METADATA_TOPIC:
            return True
    return False


def handle_metadata_fetch(ctx: Any, header: Any, frame: memoryview) -> Any:
    """A Fetch of `__cluster_metadata-0` from a voter or an observer (replica id set)."""
    lo, hi = METADATA_FETCH_VERSIONS
    req = decode(header, frame)
    if not lo <= header.api_version <= hi:
        note(header, int(ErrorCode.unsupported_version),
             f"a metadata fetch needs Fetch v{lo}-v{hi}")
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.unsupported_version,
                                "session_id": 0, "responses": []})
    return _raft(ctx, header, req)


def handle_describe_quorum(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    quorum = ctx.quorum
    d = quorum.describe()
    code = ErrorCode.none
    message = None
    asked = [(t.topic_name, int(p.partition_index)) for t in req.topics for p in t.partitions]
    if not cluster_allowed(ctx, header, AclOperation.DESCRIBE):
        # Kafka's ControllerApis throws before reading the quorum: its error response has
        # the code at the top level and no topics (DescribeQuorumRequest.getErrorResponse)
        message = "the principal lacks Describe on the cluster"
        note(header, int(ErrorCode.cluster_authorization_failed), message)
        return respond(header, {"error_code": ErrorCode.cluster_authorization_failed,
                                "error_message": message, "topics": [], "nodes": []})
    if asked != [(METADATA_TOPIC, 0)]:
        code, message = ErrorCode.unknown_topic_or_partition, "only __cluster_metadata-0"
    elif not d.is_leader:
        code, message = ErrorCode.not_leader_or_follower, "this node is not the quorum leader"

    def replica(r: Any) -> dict[str, Any]:
        return {"replica_id": r.replica_id, "replica_directory_id": None,
                "log_end_offset": r.log_end_offset,
                "last_fetch_timestamp": r.last_fetch_timestamp,
                "last_caught_up_timestamp": r.last_caught_up_timestamp}

    partition = {
        "partition_index": 0, "error_code": code, "error_message": message,
        "leader_id": d.leader_id, "leader_epoch": d.leader_epoch,
        "high_watermark": d.high_watermark,
        "current_voters": [replica(r) for r in d.voters] if code == ErrorCode.none else [],
        "observers": [replica(r) for r in d.observers] if code == ErrorCode.none else []}
    if code != ErrorCode.none:
        note(header, int(code), message)
    nodes = [{"node_id": v, "listeners": [{"name": "CONTROLLER", "host": host, "port": port}]}
             for v, (host, port) in sorted(getattr(quorum, "voter_addresses", {}).items())
             if port > 0]
    return respond(header, {
        "error_code": ErrorCode.none, "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes})
