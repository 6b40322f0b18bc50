"""Fetch (v4+): decode the request, let the ReplicaManager read (and long-poll), encode.

Records are returned as FileRegions that the server sends with os.sendfile (small ones read
into the response). Fetch sessions are not kept (as a Kafka broker whose session cache is
full): every response is a full one with session id 0, and an incremental request for a
session we never handed out gets FETCH_SESSION_ID_NOT_FOUND.
"""

from __future__ import annotations

import importlib
import uuid
from functools import partial
from typing import Any

from odradek.broker import refusals
from odradek.broker.handlers.fetch_authz import authorized_fetch
from odradek.protocol.apis import ApiKey, ApiVersionRange, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import decode_fetch_request, encode_fetch_response
from odradek.replication.fetch_params import FetchParams, FetchTopic, FetchTopicResult

_ZERO_UUID = uuid.UUID(int=0)
FETCH = int(ApiKey.FETCH)
# topic ids in place of names from this version on (KIP-516)
_TOPIC_IDS_VERSION = 13
# client metadata (rack id) from this version on
_CLIENT_METADATA_VERSION = 11
METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID


# v0-3 would need down-conversion to magic 0/1 (not done); v18 (Kafka 4.1) adds the
# follower's high watermark as a partition tag (KIP-1166): read and checked, not needed here
VERSIONS = (ApiVersionRange(ApiKey.FETCH, 4, 18),)


def handle(ctx: Any, header: Any, frame: memoryview) -> Any:
    version = header.api_version
    req = decode_fetch_request(frame, header.body_offset, version)
    hv = response_header_version(1, version)
    if req.session_id != 0 and req.session_epoch > 0:
        refusals.count_codes(FETCH, (ErrorCode.fetch_session_id_not_found,))
        return hv, encode_fetch_response(version, 0, ErrorCode.fetch_session_id_not_found, 0, [])
    for t in req.topics:
        if t.name == METADATA_TOPIC or t.topic_id == METADATA_TOPIC_ID:
            return _metadata_fetch(ctx, header, frame)
    by_id = version >= _TOPIC_IDS_VERSION
    # (name or None, topic id, [(partition, fetch offset, partition max bytes,
    # current leader epoch)])
    topics: list[FetchTopic] = [
        (t.name, t.topic_id or _ZERO_UUID,
         [(p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
          for p in t.partitions])
        for t in req.topics]
    if by_id:
        known = ctx.image.topics_by_id
        for i, (_, tid, parts) in enumerate(topics):
            topic = known.get(tid)
            topics[i] = (topic.name if topic is not None else None, tid, parts)
    # client metadata (Fetch v11+): a consumer that may be sent to a follower (KIP-392)
    rack = req.rack_id if version >= _CLIENT_METADATA_VERSION else None
    params = FetchParams(req.replica_id, req.max_wait_ms, req.min_bytes, req.max_bytes,
                         req.isolation_level, by_id, rack, req.replica_epoch)
    if ctx.authorizer is not None or ctx.quotas.active:  # issue 16: ACLs, consumer quotas
        return authorized_fetch(ctx, header, params, topics, hv, version)
    # a partial, not a closure: cheaper to make and to call, once per fetch
    return ctx.replica_manager.fetch_messages(params, topics, partial(_respond, hv, version))


def _metadata_fetch(ctx: Any, header: Any, frame: memoryview) -> Any:
    """A Fetch of `__cluster_metadata` is the raft's (a voter or observer replicating the
    metadata log): h14raft's handler, looked up so that this module works without it."""
    try:
        raft = importlib.import_module("odradek.broker.handlers.raft")
    except ImportError:
        raft = None
    handler = getattr(raft, "handle_metadata_fetch", None)
    if handler is None:
        hv = response_header_version(1, header.api_version)
        refusals.count_codes(FETCH, (ErrorCode.unknown_server_error,))
        return hv, encode_fetch_response(header.api_version, 0, ErrorCode.unknown_server_error,
                                         0, [])
    return handler(ctx, header, frame)


def _respond(hv: int, version: int, results: list[FetchTopicResult]) -> tuple[int, list[Any]]:
    # errors_total: the read counted the codes it set (replication.reading.FetchErrorCounts)
    return hv, encode_fetch_response(version, 0, ErrorCode.none, 0, results)
