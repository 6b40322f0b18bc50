"""WriteTxnMarkers (API 27, v1; Kafka 4.0 dropped v0): a transaction coordinator asks this node, the leader of
some of a transaction's partitions, to append its COMMIT/ABORT markers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest).

Each marker is appended as the leader with required acks -1 (replication/markers.py): the
answer goes out once every written marker is in its partition's ISR (the produce
purgatory), with an error per partition: NOT_LEADER_OR_FOLLOWER or
UNKNOWN_TOPIC_OR_PARTITION where this node does not lead it, NOT_ENOUGH_REPLICAS below
min.insync.replicas, TRANSACTION_COORDINATOR_FENCED for a coordinator older than the last
one that wrote a marker for the producer here, INVALID_PRODUCER_EPOCH for a stale producer
epoch, REQUEST_TIMED_OUT when the ISR did not catch up in time. The coordinator sends the
failed partitions again. A COMMIT marker in `__consumer_offsets` makes the transaction's
offsets the group's committed offsets here, where the group coordinator lives.
"""

from __future__ import annotations

from typing import Any

from odradek.broker.authz import cluster_allowed
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.offsets_topic import TOPIC as OFFSETS_TOPIC
from odradek.metadata.acls import AclOperation
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode
from odradek.replication.markers import MarkerAppend, append_marker

E = ErrorCode
# request.timeout.ms: how long the answer waits for the ISR (Kafka appends markers with the
# broker's request timeout)
ISR_WAIT_MS = 30000

VERSIONS = (ApiVersionRange(ApiKey.WRITE_TXN_MARKERS, 1, 1),)


def handle_write_txn_markers(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, AclOperation.CLUSTER_ACTION):
        # issue 16: only a transaction coordinator (a broker: ClusterAction) writes markers;
        # every partition answers CLUSTER_AUTHORIZATION_FAILED, as Kafka's error response
        return respond(header, {"markers": [
            {"producer_id": int(m.producer_id), "topics": [
                {"name": t.name, "partitions": [
                    {"partition_index": int(p), "error_code": E.cluster_authorization_failed}
                    for p in t.partition_indexes]} for t in m.topics]}
            for m in req.markers]})
    rm = ctx.replica_manager
    # (producer id, commit, [(topic, partition, append)]) in request order
    done: list[tuple[int, bool, list[tuple[str, int, MarkerAppend]]]] = []
    waits: list[tuple[Any, int, int]] = []
    waiting: list[MarkerAppend] = []
    for marker in req.markers:
        pid, commit = int(marker.producer_id), bool(marker.transaction_result)
        rows = []
        for t in marker.topics:
            for p in t.partition_indexes:
                r = append_marker(rm, t.name, int(p), pid, int(marker.producer_epoch),
                                  int(marker.coordinator_epoch), commit)
                rows.append((t.name, int(p), r))
                if r.error == E.none and not r.replicated:
                    waits.append((r.partition, r.required_offset, r.leader_epoch))
                    waiting.append(r)
        done.append((pid, commit, rows))

    def answer(errors: list[ErrorCode]) -> Response:
        for r, error in zip(waiting, errors, strict=True):
            r.error = ErrorCode(error)
        groups = ctx.group_coordinator
        markers = []
        for pid, commit, rows in done:
            by_topic: dict[str, list[dict[str, Any]]] = {}
            applied = False
            for topic, p, r in rows:
                by_topic.setdefault(topic, []).append({"partition_index": p,
                                                       "error_code": r.error})
                if topic == OFFSETS_TOPIC and r.error == E.none and not applied:
                    applied = True
                    if groups is not None:
                        groups.complete_txn_offsets(pid, commit)
            markers.append({"producer_id": pid, "topics": [
                {"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        return respond(header, {"markers": markers})

    if not waits:
        return answer([])
    return rm.delay_produce(waits, ISR_WAIT_MS, answer)
