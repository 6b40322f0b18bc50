"""Fetch with an authorizer or client quotas (issue 16), apart from fetch.py so its hot path
stays as it was.

ACLs: a follower needs ClusterAction on the cluster, a consumer Read on each topic; a topic
it may not read answers TOPIC_AUTHORIZATION_FAILED in its partitions, the others are read as
usual. Quotas: a consumer's answer is charged against its consumer_byte_rate by its size;
when that calls for throttling, Kafka's way is kept: the charge is taken back, the answer
goes out empty with throttle_time_ms, and the channel is muted that long.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from odradek.broker import authz, refusals
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import FetchPartitionResponse, encode_fetch_response, parts_size
from odradek.replication.fetch_params import FetchParams, FetchTopic, FetchTopicResult
from odradek.security.quotas import CONSUMER_BYTE_RATE


def authorized_fetch(ctx: Any, header: Any, params: FetchParams, topics: list[FetchTopic],
                     hv: int, version: int) -> Any:
    if ctx.authorizer is None:
        allowed, denied = topics, []
    elif params.replica_id >= 0:
        ok = authz.cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION)
        allowed = topics if ok else []
        denied = [] if ok else topics
    else:
        allowed, denied = [], []
        for t in topics:
            # a topic id we do not know (name None) is the replica manager's to answer
            if t[0] is None or authz.allowed(ctx, header, AclOperation.READ,
                                             ResourceType.TOPIC, t[0]):
                allowed.append(t)
            else:
                denied.append(t)
    refused: list[FetchTopicResult] = [
        (name or "", tid, [FetchPartitionResponse(p[0], ErrorCode.topic_authorization_failed, -1)
                           for p in parts])
        for name, tid, parts in denied]
    charge = params.replica_id < 0 and ctx.quotas.active and hasattr(header, "session")
    respond = partial(_respond, ctx, header if charge else None, hv, version, refused)
    if not allowed:
        return respond([])
    return ctx.replica_manager.fetch_messages(params, allowed, respond)


def _respond(ctx: Any, header: Any, hv: int, version: int, refused: list[FetchTopicResult],
             results: list[FetchTopicResult]) -> tuple[int, list[Any]]:
    every = [*results, *refused]
    parts = encode_fetch_response(version, 0, ErrorCode.none, 0, every)
    if header is None:
        _count_refused(results, refused)
        return hv, parts
    quotas, user, client = ctx.quotas, header.session.principal.name, header.client_id or ""
    size = parts_size(parts)
    throttle = quotas.record(CONSUMER_BYTE_RATE, user, client, size)
    if throttle <= 0:
        _count_refused(results, refused)
        return hv, parts
    quotas.unrecord(CONSUMER_BYTE_RATE, user, client, size)
    # the answer goes out empty: the codes the read counted are not in it
    ctx.replica_manager.fetch_errors.take_back(_codes(results))
    mute = getattr(header.conn, "mute", None)
    if mute is not None:
        mute(throttle)
    return hv, encode_fetch_response(version, throttle, ErrorCode.none, 0, [])


def _codes(results: list[FetchTopicResult]) -> list[int]:
    return [p[1] for _, _, parts in results for p in parts if p[1]]


def _count_refused(results: list[FetchTopicResult], refused: list[FetchTopicResult]) -> None:
    """errors_total: the refused topics' codes (the read counted its partitions' own); the
    answer counts once as erred, by the read when it had codes of its own."""
    if refused:
        refusals.count_codes(ApiKey.FETCH, _codes(refused), answered=not _codes(results))
