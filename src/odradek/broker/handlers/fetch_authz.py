"""Fetch with an authorizer (issue 16), apart from fetch.py so its hot path stays as it was:
a follower needs ClusterAction on the cluster, a consumer Read on each topic. A topic it may
not read answers TOPIC_AUTHORIZATION_FAILED in its partitions; the others are read as usual."""

from __future__ import annotations

from functools import partial
from typing import Any

from odradek.broker import authz
from odradek.metadata.acls import AclOperation, ResourceType
from odradek.protocol.errors import ErrorCode
from odradek.protocol.fetch import FetchPartitionResponse, encode_fetch_response
from odradek.replication.fetch_params import FetchParams, FetchTopic, FetchTopicResult


def authorized_fetch(ctx: Any, header: Any, params: FetchParams, topics: list[FetchTopic],
                     hv: int, version: int) -> Any:
    if params.replica_id >= 0:
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
    if not allowed:
        return hv, encode_fetch_response(version, 0, ErrorCode.none, 0, refused)
    return ctx.replica_manager.fetch_messages(params, allowed,
                                              partial(_respond, hv, version, refused))


def _respond(hv: int, version: int, refused: list[FetchTopicResult],
             results: list[FetchTopicResult]) -> tuple[int, list[Any]]:
    return hv, encode_fetch_response(version, 0, ErrorCode.none, 0, [*results, *refused])
