"""InitProducerId and the transaction apis: AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn, DescribeTransactions, ListTransactions, DescribeProducers.

Idempotent producers (no transactional id) always get a fresh producer id with epoch 0,
as Kafka's TransactionCoordinator does for them, also when they present their old id
and epoch to recover from an error (KIP-360): a new id makes every old sequence moot.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from odradek.broker.authz import allowed, any_allowed
from odradek.broker.entities import ms
from odradek.broker.handlers.common import Response, decode, respond
from odradek.broker.txn_verification import needs_verification, verify
from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.group.offset_manager import encode_offset_record
from odradek.coordinator.transaction.coordinator import InitResult, TransactionCoordinator
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.acls import ResourceType as RT
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import ATTR_TRANSACTIONAL, BATCH_HEADER_SIZE, BatchHeader

log = logging.getLogger(__name__)

E = ErrorCode
OFFSETS_TOPIC = ot.TOPIC

def _tc(ctx: Any) -> TransactionCoordinator | None:
    return getattr(ctx, "transaction_coordinator", None)


# ------------------------------------------------------------------ handlers


def _ipid(header: Any, code: ErrorCode, pid: int = -1, epoch: int = -1) -> Response:
    return respond(header, {"throttle_time": 0, "error_code": code, "producer_id": pid,
                            "producer_epoch": epoch})


# EndTxn v5, TxnOffsetCommit v5: KIP-890 part 2 (Kafka 4.0, beyond Kafka 3.9): epoch bumped
# at the end of every transaction, TxnOffsetCommit doing AddOffsetsToTxn's work
VERSIONS = (
    ApiVersionRange(ApiKey.INIT_PRODUCER_ID, 0, 5),
    ApiVersionRange(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5),
    ApiVersionRange(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4),
    ApiVersionRange(ApiKey.END_TXN, 0, 5),
    ApiVersionRange(ApiKey.TXN_OFFSET_COMMIT, 0, 5),
    ApiVersionRange(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0),
    ApiVersionRange(ApiKey.LIST_TRANSACTIONS, 0, 1),
    ApiVersionRange(ApiKey.DESCRIBE_PRODUCERS, 0, 0),
)


def handle_init_producer_id(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    txn_id = req.transactional_id
    if ctx.authorizer is not None:
        # Kafka: Write on the transactional id; an idempotent producer needs IdempotentWrite
        # on the cluster or Write on some topic (KIP-679)
        if txn_id is not None and not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID,
                                              txn_id):
            return _ipid(header, E.transactional_id_authorization_failed)
        if txn_id is None and not (
                allowed(ctx, header, Op.IDEMPOTENT_WRITE, RT.CLUSTER, "kafka-cluster",
                        log_if_denied=False)
                or any_allowed(ctx, header, Op.WRITE, RT.TOPIC)):
            return _ipid(header, E.cluster_authorization_failed)
    if txn_id is not None:
        tc = _tc(ctx)
        if tc is None:
            return _ipid(header, E.coordinator_not_available)
        pid = int(getattr(req, "producer_id", -1))
        epoch = int(getattr(req, "producer_epoch", -1))
        r = tc.init_producer_id(txn_id, ms(req.transaction_timeout), pid, epoch)
        code = r.error
        if code == E.producer_fenced and header.api_version < 4:
            code = E.invalid_producer_epoch  # older clients do not know PRODUCER_FENCED
        return _ipid(header, code, r.producer_id, r.producer_epoch)
    tc = _tc(ctx)
    if tc is None:
        return _ipid(header, E.coordinator_not_available)
    try:
        pid = tc.generate_producer_id()
    except Exception:
        log.exception("allocating a producer id block failed")
        return _ipid(header, E.coordinator_not_available)
    return _ipid(header, E.none, pid, 0)


def _fenced(code: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    # PRODUCER_FENCED reaches clients only from the versions that know it
    if code == E.producer_fenced and version < first_fenced_version:
        return E.invalid_producer_epoch
    return code


def handle_add_partitions_to_txn(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    v = header.api_version

    def results(tid: str, pid: int, epoch: int, topics: Any, verify: bool) -> list[dict[str, Any]]:
        tps = [(t.name, int(p)) for t in topics for p in t.partitions]
        refused = _txn_partitions_refused(ctx, header, tid, tps)
        if refused is not None:
            res = refused
        elif tc is None:
            res = dict.fromkeys(tps, E.coordinator_not_available)
        else:
            res = tc.add_partitions(tid, pid, epoch, tps, verify)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), code in res.items():
            by_topic.setdefault(t, []).append(
                {"partition_index": p, "partition_error_code": _fenced(code, v, 2)})
        return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]

    if v <= 3:
        return respond(header, {"throttle_time": 0, "results_by_topic_v3_and_below": results(
            req.v3_and_below_transactional_id, int(req.v3_and_below_producer_id),
            int(req.v3_and_below_producer_epoch), req.v3_and_below_topics, False)})
    return respond(header, {"throttle_time": 0, "error_code": E.none, "results_by_transaction": [
        {"transactional_id": t.transactional_id, "topic_results": results(
            t.transactional_id, int(t.producer_id), int(t.producer_epoch), t.topics,
            bool(t.verify_only))} for t in req.transactions]})


def _txn_partitions_refused(ctx: Any, header: Any, tid: str, tps: list[tuple[str, int]]
                            ) -> dict[tuple[str, int], ErrorCode] | None:
    # Kafka: Write on the transactional id, then Write on each topic; any denial fails the
    # whole set (denied ones TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED)
    if ctx.authorizer is None:
        return None
    if not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID, tid):
        return dict.fromkeys(tps, E.transactional_id_authorization_failed)
    denied = {t for t, _ in tps if not allowed(ctx, header, Op.WRITE, RT.TOPIC, t)}
    if not denied:
        return None
    return {(t, p): E.topic_authorization_failed if t in denied else E.operation_not_attempted
            for t, p in tps}


def _offsets_partitions(ctx: Any) -> int:
    t = ctx.image.topics_by_name.get(OFFSETS_TOPIC)
    return len(t.partitions) if t is not None else 50


def handle_add_offsets_to_txn(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    if not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        return respond(header, {"throttle_time": 0,
                                "error_code": E.transactional_id_authorization_failed})
    if not allowed(ctx, header, Op.READ, RT.GROUP, req.group_id):
        return respond(header, {"throttle_time": 0, "error_code": E.group_authorization_failed})
    code = E.coordinator_not_available if tc is None else tc.add_offsets(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), req.group_id,
        OFFSETS_TOPIC, _offsets_partitions(ctx))
    return respond(header, {"throttle_time": 0,
                            "error_code": _fenced(code, header.api_version, 2)})


def handle_end_txn(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    if not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        return respond(header, {"throttle_time": 0,
                                "error_code": E.transactional_id_authorization_failed,
                                "producer_id": -1, "producer_epoch": -1})
    if header.api_version >= 5:
        # KIP-890 part 2: the epoch is bumped and the new producer id/epoch answered
        r = (InitResult(E.coordinator_not_available) if tc is None else tc.end_txn_v2(
            req.transactional_id, int(req.producer_id), int(req.producer_epoch),
            bool(req.committed)))
        if r.error != E.none:
            log.info("EndTxn v%d of %r (producer %d epoch %d): %s", header.api_version,
                     req.transactional_id, int(req.producer_id), int(req.producer_epoch),
                     ErrorCode(r.error).name.upper())
        return respond(header, {"throttle_time": 0, "error_code": r.error,
                                "producer_id": r.producer_id, "producer_epoch": r.producer_epoch})
    code = E.coordinator_not_available if tc is None else tc.end_txn(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), bool(req.committed))
    return respond(header, {"throttle_time": 0,
                            "error_code": _fenced(code, header.api_version, 2)})


# AddPartitionsToTxn answers that a produce cannot pass on as they are (Kafka's
# AddPartitionsToTxnManager): coordinator trouble is retriable for the producer
_PRODUCE_RETRIABLE = frozenset({E.not_coordinator, E.coordinator_not_available,
                                E.coordinator_load_in_progress, E.concurrent_transactions})


def produce_code(code: ErrorCode) -> ErrorCode:
    """What a produce answers for a coordinator's verdict on its transactional batch."""
    if code == E.none:
        return code
    if code in (E.producer_fenced, E.invalid_producer_epoch):
        return E.invalid_producer_epoch
    if code in _PRODUCE_RETRIABLE:
        return E.not_enough_replicas
    return code


def unverified(ctx: Any, transactional_id: str, topics: Any, version: int
               ) -> list[tuple[tuple[str, int], int, int]]:
    """The transactional batches of a produce whose partition leads here but has not seen
    the producer's transaction yet: ((topic, partition), producer id, epoch), to be verified
    with the coordinator first (v3-11, KIP-890 part 1), or added by it (v12, part 2), on this
    node or another; the batch is appended once the coordinator's record is committed."""
    rm = ctx.replica_manager
    out = []
    for topic in topics:
        for index, records in topic.partitions:
            if records is None or len(records) < BATCH_HEADER_SIZE:
                continue
            part = rm.get(topic.name, index)
            if part is None or not part.is_leader:
                continue
            try:
                h = BatchHeader.parse(records)
            except Exception:
                continue  # the append refuses it with the right error
            if (h.attributes & ATTR_TRANSACTIONAL and h.producer_id >= 0
                    and needs_verification(part, h.producer_id, h.producer_epoch)):
                out.append(((topic.name, int(index)), h.producer_id, h.producer_epoch))
    return out


async def verify_batches(ctx: Any, transactional_id: str,
                         items: list[tuple[tuple[str, int], int, int]], add: bool = False
                         ) -> dict[tuple[str, int], ErrorCode]:
    """The produce error of each unverified partition (NONE: verified, append it)."""
    out = {}
    for tp, pid, epoch in items:
        out[tp] = produce_code(await verify(ctx, transactional_id, pid, epoch, tp, add))
    return out


def handle_txn_offset_commit(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    for t in req.topics:
        for p in t.partitions:
            offsets[(t.name, int(p.partition_index))] = (
                int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata or "")
    # Kafka: Write on the transactional id, Read on the group (each failing the whole
    # request), then Read on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions only)
    code: ErrorCode | None = None
    denied: set[str] = set()
    if not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        code = E.transactional_id_authorization_failed
    elif not allowed(ctx, header, Op.READ, RT.GROUP, req.group_id):
        code = E.group_authorization_failed
    elif ctx.authorizer is not None:
        denied = {t for t, _ in offsets if not allowed(ctx, header, Op.READ, RT.TOPIC, t)}
    committing = {k: v for k, v in offsets.items() if k[0] not in denied}
    if code is None and committing:
        if tc is not None and tc.coordinator_error(req.transactional_id) == E.not_coordinator:
            # the group's coordinator is here, the transaction's elsewhere
            return _remote_txn_offset_commit(ctx, header, req, tc, committing, offsets, denied)
        args = (req.transactional_id, int(req.producer_id), int(req.producer_epoch),
                req.group_id, committing, int(getattr(req, "generation_id", -1)),
                getattr(req, "member_id", ""), getattr(req, "group_instance_id", None),
                _offsets_partitions(ctx))
        if tc is None:
            code = E.coordinator_not_available
        elif header.api_version >= 5:
            return _answer_when(tc.commit_offsets_v5(*args), header, offsets, denied)
        else:
            code = tc.commit_offsets(*args)
    return _txn_offset_answer(header, offsets, code if code is not None else E.none, denied)


async def _answer_when(code: Any, header: Any, offsets: dict[tuple[str, int], Any],
                       denied: set[str]) -> Response:
    return _txn_offset_answer(header, offsets, await code, denied)


def _txn_offset_answer(header: Any, offsets: dict[tuple[str, int], Any],
                       code: ErrorCode, denied: set[str] | frozenset[str] = frozenset()
                       ) -> Response:
    code = _fenced(code, header.api_version, 3)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for t, p in offsets:
        by_topic.setdefault(t, []).append({
            "partition_index": p,
            "error_code": E.topic_authorization_failed if t in denied else code})
    return respond(header, {"throttle_time": 0, "topics": [
        {"name": t, "partitions": ps} for t, ps in by_topic.items()]})


async def _remote_txn_offset_commit(ctx: Any, header: Any, req: Any, tc: Any,
                                    offsets: dict[tuple[str, int], tuple[int, int, str]],
                                    asked: dict[tuple[str, int], Any], denied: set[str]
                                    ) -> Response:
    """TxnOffsetCommit where the transaction's coordinator is another node: the group
    coordinator's checks here, then the transaction coordinator confirms (v5: adds) the
    group's `__consumer_offsets` partition in the producer's transaction (Kafka's
    verification through AddPartitionsToTxn), then the offsets are written; they take
    effect with the commit marker the coordinator sends."""
    g = tc.groups
    group_id, pid, epoch = req.group_id, int(req.producer_id), int(req.producer_epoch)
    generation = int(getattr(req, "generation_id", -1))
    code = E.coordinator_not_available if g is None else g.coordinator_error(group_id)
    if code == E.none and generation >= 0:
        code = g.validate_commit(group_id, generation, getattr(req, "member_id", ""),
                                 getattr(req, "group_instance_id", None), False)
    if code == E.none and any(g.topics(t) is None for t, _ in offsets):
        code = E.unknown_topic_or_partition
    if code == E.none:
        tp = (OFFSETS_TOPIC, ot.partition_for(group_id, _offsets_partitions(ctx)))
        code = await verify(ctx, req.transactional_id, pid, epoch, tp,
                            add=header.api_version >= 5)
        if code in (E.not_coordinator, E.coordinator_load_in_progress):
            code = E.coordinator_not_available  # the *transaction's* coordinator: retriable
        elif code == E.not_leader_or_follower:
            code = E.not_coordinator  # the group's partition moved away meanwhile
    if code == E.none:
        code = g.append_txn_offsets(group_id, pid, epoch, offsets, encode_offset_record)
    return _txn_offset_answer(header, asked, code, denied)


def handle_describe_transactions(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    out = []
    for tid in req.transactional_ids:
        code, m = (E.coordinator_not_available, None) if tc is None else tc.describe(tid)
        if not allowed(ctx, header, Op.DESCRIBE, RT.TRANSACTIONAL_ID, tid):
            code, m = E.transactional_id_authorization_failed, None
        if m is None:
            out.append({"error_code": code, "transactional_id": tid, "transaction_state": "",
                        "transaction_timeout": 0, "transaction_start_time": -1,
                        "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(m.partitions):
            by_topic.setdefault(t, []).append(p)
        out.append({"error_code": E.none, "transactional_id": tid,
                    "transaction_state": m.state.label, "transaction_timeout": m.timeout_ms,
                    "transaction_start_time": m.start_ms, "producer_id": m.producer_id,
                    "producer_epoch": m.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return respond(header, {"throttle_time": 0, "transaction_states": out})


_STATE_LABELS = {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                 "CompleteAbort", "Dead", "PrepareEpochFence"}


def handle_list_transactions(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    tc = _tc(ctx)
    states = list(req.state_filters)
    unknown = [s for s in states if s not in _STATE_LABELS]
    pids = [int(p) for p in req.producer_id_filters]
    duration = int(getattr(req, "duration_filter", -1))
    now = int(time.time() * 1000)
    txns = [] if tc is None else tc.list(states, pids)
    if duration >= 0:
        txns = [m for m in txns if m.start_ms >= 0 and now - m.start_ms > duration]
    if ctx.authorizer is not None:  # Kafka: only the ids it may describe, unlogged
        txns = [m for m in txns if allowed(ctx, header, Op.DESCRIBE, RT.TRANSACTIONAL_ID,
                                           m.transactional_id, log_if_denied=False)]
    return respond(header, {
        "throttle_time": 0,
        "error_code": E.none if tc is not None else E.coordinator_not_available,
        "unknown_state_filters": unknown,
        "transaction_states": [{"transactional_id": m.transactional_id,
                                "producer_id": m.producer_id,
                                "transaction_state": m.state.label} for m in txns]})


def handle_describe_producers(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    rm = ctx.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        if not allowed(ctx, header, Op.READ, RT.TOPIC, t.name):
            topics.append({"name": t.name, "partitions": [
                {"partition_index": int(p), "error_code": E.topic_authorization_failed,
                 "error_message": None, "active_producers": []} for p in t.partition_indexes]})
            continue
        for p in t.partition_indexes:
            part = rm.get(t.name, int(p))
            if part is None:
                parts.append({"partition_index": int(p),
                              "error_code": E.unknown_topic_or_partition,
                              "error_message": None, "active_producers": []})
                continue
            state = part.log.producer_state
            producers = [{"producer_id": e.producer_id, "producer_epoch": e.epoch,
                          "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                          "coordinator_epoch": e.coordinator_epoch,
                          "current_txn_start_offset": state.ongoing.get(e.producer_id, -1)}
                         for e in list(state.producers.values())]
            parts.append({"partition_index": int(p), "error_code": E.none,
                          "error_message": None, "active_producers": producers})
        topics.append({"name": t.name, "partitions": parts})
    return respond(header, {"throttle_time": 0, "topics": topics})
