"""The share-group state persister RPCs (KIP-932), served by the share coordinator of the
`__share_group_state` partitions this node leads, as Kafka's KafkaApis serves them:
InitializeShareGroupState (83) v0, ReadShareGroupState (84) v0, WriteShareGroupState (85)
v0-1, DeleteShareGroupState (86) v0 and ReadShareGroupStateSummary (87) v0-1; and the
share key type (2) of FindCoordinator.

They are node-to-node APIs: the principal needs ClusterAction on the cluster (a share-
partition leader is a broker), else every partition answers CLUSTER_AUTHORIZATION_FAILED,
as Kafka's error response for an authorization failure does. Each partition is answered by
the state store (coordinator/share/state_store.py) with Kafka's codes: NOT_COORDINATOR or
COORDINATOR_LOAD_IN_PROGRESS for a key this node does not serve (yet), FENCED_LEADER_EPOCH
and FENCED_STATE_EPOCH for stale writers, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST.
The writing operations answer only once their record is in the ISR of its partition
(CoordinatorRuntime.durably); a write that does not get there answers NOT_COORDINATOR or
COORDINATOR_NOT_AVAILABLE for every partition, never success.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import uuid
from collections.abc import Callable
from typing import Any

from odradek.broker.authz import cluster_allowed
from odradek.broker.handlers.admin import coordinator_at
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.offsets_topic import partition_for
from odradek.coordinator.runtime import WriteNotReplicated
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.coordinator.share.partition import RecordState, StateBatch
from odradek.coordinator.share.state_log import TOPIC, ShareKey
from odradek.coordinator.share.state_store import Answer
from odradek.metadata.acls import AclOperation
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

E = ErrorCode
SHARE_KEY = 2  # FindCoordinator's key type of the share coordinator

VERSIONS = (
    ApiVersionRange(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0),
    ApiVersionRange(ApiKey.READ_SHARE_GROUP_STATE, 0, 0),
    ApiVersionRange(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1),
    ApiVersionRange(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0),
    ApiVersionRange(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1),
)

_PERSISTED = frozenset(int(s) for s in (RecordState.AVAILABLE, RecordState.ACKNOWLEDGED,
                                        RecordState.ARCHIVED))

# what each API's partition result carries besides partition, error_code, error_message
PartitionRow = Callable[[Answer], dict[str, Any]]


def _no_fields(a: Answer) -> dict[str, Any]:
    return {}


def _read_fields(a: Answer) -> dict[str, Any]:
    return {"state_epoch": a.state_epoch, "start_offset": a.start_offset,
            "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                               "delivery_state": int(b.state),
                               "delivery_count": b.delivery_count} for b in a.batches]}


def _summary_fields(a: Answer) -> dict[str, Any]:
    return {"state_epoch": a.state_epoch, "leader_epoch": a.leader_epoch,
            "start_offset": a.start_offset,
            "delivery_complete_count": a.delivery_complete_count}


def _coord(ctx: Any) -> ShareCoordinator | None:
    return getattr(ctx, "share_coordinator", None)


def _answer(header: Any, req: Any, per_partition: Callable[[uuid.UUID, Any], Answer],
            fields: PartitionRow) -> Response:
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            a = per_partition(t.topic_id, p)
            row = {"partition": int(p.partition), "error_code": a.error,
                   "error_message": a.message}
            # an error carries the defaults of the other fields, as Kafka's error results
            row.update(fields(a if a.error == E.none else Answer(a.error)))
            parts.append(row)
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return respond(header, {"results": results})


def _everywhere(header: Any, req: Any, code: ErrorCode, fields: PartitionRow,
                message: str | None = None) -> Response:
    return _answer(header, req, lambda tid, p: Answer(code, message), fields)


async def _serve(ctx: Any, header: Any, frame: memoryview,
                 op: Callable[[ShareCoordinator, ShareKey, Any], Answer],
                 fields: PartitionRow, writes: bool) -> Response:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION):
        return _everywhere(header, req, E.cluster_authorization_failed, fields)
    coord = _coord(ctx)
    if coord is None:
        return _everywhere(header, req, E.coordinator_not_available, fields,
                           "Share coordinator is not enabled.")
    # this node learns of __share_group_state when asked (it never created it): the
    # metadata has it once a share-partition leader names this node its coordinator
    if not coord.store.num_partitions and (coord.topics(TOPIC) is None
                                           or await coord.ensure_ready() != E.none):
        return _everywhere(header, req, E.coordinator_not_available, fields)

    def run() -> Response:
        return _answer(header, req, lambda tid, p: op(coord, ShareKey(
            req.group_id or "", tid, int(p.partition)), p), fields)

    if not writes:
        return run()
    try:
        result = coord.runtime.durably(run)
        if asyncio.iscoroutine(result):
            result = await result
        return result  # type: ignore[no-any-return]
    except WriteNotReplicated as exc:
        return _everywhere(header, req, exc.code, fields, str(exc))


# ------------------------------------------------------------------ the five APIs


def handle_initialize(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _serve(ctx, header, frame, lambda c, k, p: c.store.initialize(
        k, int(p.state_epoch), int(p.start_offset)), _no_fields, True)


def handle_read(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _serve(ctx, header, frame, lambda c, k, p: c.store.read(k, int(p.leader_epoch)),
                  _read_fields, False)


def _write(c: ShareCoordinator, key: ShareKey, p: Any) -> Answer:
    batches = []
    for b in p.state_batches:
        if int(b.delivery_state) not in _PERSISTED:
            return Answer(E.invalid_request, f"Delivery state {int(b.delivery_state)} is "
                                             "not a persisted state.")
        batches.append(StateBatch(int(b.first_offset), int(b.last_offset),
                                  RecordState(int(b.delivery_state)), int(b.delivery_count)))
    return c.store.write(key, int(p.state_epoch), int(p.leader_epoch), int(p.start_offset),
                         batches)


def handle_write(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _serve(ctx, header, frame, _write, _no_fields, True)


def handle_delete(ctx: Any, header: Any, frame: memoryview) -> Any:
    return _serve(ctx, header, frame, lambda c, k, p: c.store.delete(k), _no_fields, True)


def handle_summary(ctx: Any, header: Any, frame: memoryview) -> Any:
    def fields(a: Answer) -> dict[str, Any]:
        out = _summary_fields(a)
        if header.api_version < 1:
            del out["delivery_complete_count"]
        return out

    return _serve(ctx, header, frame, lambda c, k, p: c.store.summary(k, int(p.leader_epoch)),
                  fields, False)


# ------------------------------------------------------------------ FindCoordinator


def parse_share_key(key: str) -> ShareKey | None:
    """"groupId:topicId:partition" (the group id may itself hold colons; the topic id is
    Kafka's base64 Uuid or the canonical form); None when malformed."""
    group, sep, rest = key.rpartition(":")
    if not sep:
        return None
    group_id, sep, topic = group.rpartition(":")
    if not sep or not group_id:
        return None
    try:
        partition = int(rest, 10)
    except ValueError:
        return None
    if partition < 0 or not rest.isdigit():
        return None
    topic_id = _topic_id(topic)
    return None if topic_id is None else ShareKey(group_id, topic_id, partition)


def _topic_id(text: str) -> uuid.UUID | None:
    if len(text) == 22:  # Kafka's Uuid.toString: url-safe base64 without padding
        try:
            raw = base64.urlsafe_b64decode(text + "==")
        except (binascii.Error, ValueError):
            return None
        return uuid.UUID(bytes=raw) if len(raw) == 16 else None
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def find_share_coordinator(ctx: Any, header: Any, key: str) -> dict[str, Any]:
    """FindCoordinator's answer for key type 2: the leader of the `__share_group_state`
    partition of the key. Kafka asks v6+, ClusterAction on the cluster and a well-formed
    key; with no such topic yet, COORDINATOR_NOT_AVAILABLE (Kafka creates it then; here the
    first share group does)."""
    def err(code: ErrorCode, message: str | None = None) -> dict[str, Any]:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": code,
                "error_message": message}

    if header.api_version < 6:
        return err(E.invalid_request, "The share key type needs FindCoordinator v6.")
    if not cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION):
        return err(E.cluster_authorization_failed)
    coord = _coord(ctx)
    if coord is None:
        return err(E.invalid_request, "Share coordinator is not enabled.")
    parsed = parse_share_key(key)
    if parsed is None:
        return err(E.invalid_request, f"Malformed share coordinator key {key!r}.")
    info = coord.topics(TOPIC)
    if info is None:
        return err(E.coordinator_not_available)
    partition = partition_for(parsed.coordinator_key(), info[1])
    return coordinator_at(ctx, TOPIC, partition, key) or err(E.coordinator_not_available)
