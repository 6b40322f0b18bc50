"""Produce: validate each partition's batch and append it, without decoding records.

The request is read by the hand-written decoder: record sets stay memoryviews
into the request frame and go to the log's os.writev as they are. The request's
version goes down with them: storage's log validator checks what it allows
(one batch from v3, ZSTD from v7).
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

from odradek.broker import refusals
from odradek.broker.authz import SessionHeader, produce_denials
from odradek.broker.handlers.common import INTERNAL_TOPICS, Response, valid_topic_name
from odradek.broker.handlers.transactions import unverified, verify_batches
from odradek.broker.schema_validation import RegistryUnavailable
from odradek.broker.transport_signals import Disconnect
from odradek.protocol.apis import ApiKey, ApiVersionRange, response_header_version
from odradek.protocol.errors import ErrorCode
from odradek.protocol.produce import (
    PartitionResult,
    decode_produce_request,
    encode_produce_response,
)

log = logging.getLogger(__name__)

_VALID_ACKS = (-1, 0, 1)

# v0-13; v12 (Kafka 4.0, KIP-890 part 2) adds the partition to the transaction itself, v13
# (Kafka 4.1) names topics by id
VERSIONS = (ApiVersionRange(ApiKey.PRODUCE, 0, 13),)


def handle(ctx: Any, header: Any, frame: memoryview) -> Any:
    version = header.api_version
    req = decode_produce_request(frame, header.body_offset, version)
    if req.transactional_id is not None:
        # KIP-890: a transaction's first batch on a partition waits for its coordinator
        # (often another node) to confirm (v12: add) the partition in the transaction
        pending = unverified(ctx, req.transactional_id, req.topics, version)
        if pending:
            return _verified_then(ctx, header, req, pending)
    return _validated(ctx, header, req, {})


async def _settled(result: Any) -> Any:
    return (await result) if not isinstance(result, tuple | None) else result


async def _verified_then(ctx: Any, header: Any, req: Any, pending: list[Any]) -> Any:
    refused = await verify_batches(ctx, req.transactional_id, pending,
                                   add=header.api_version >= 12)
    return await _settled(_validated(ctx, header, req, {tp: c for tp, c in refused.items() if c}))


def _validated(ctx: Any, header: Any, req: Any, refused: dict[tuple[str, int], ErrorCode]
               ) -> Any:
    # broker-side schema validation (issue 17): only topics that ask for it pay
    verdicts = None
    validation = ctx.schema_validation
    if validation is not None:
        validating = validation.topics(ctx.image)
        if validating:
            verdicts, missing = _judge(validation, validating, req)
            if missing:
                # ids the cache does not know yet: ask the registry, then answer (the
                # request's views keep their receive buffer alive meanwhile)
                return _after_lookup(ctx, header, req, refused, missing)
    return _produce(ctx, header, req, refused, verdicts, None)


def _judge(validation: Any, validating: dict[str, tuple[bool, bool]], req: Any,
           ) -> tuple[dict[tuple[str, int], Any], frozenset[tuple[str, int]]]:
    verdicts: dict[tuple[str, int], Any] = {}
    missing: set[tuple[str, int]] = set()
    for topic in req.topics:
        flags = validating.get(topic.name)
        if flags is None:
            continue
        for index, records in topic.partitions:
            verdict = verdicts[(topic.name, index)] = validation.judge(topic.name, flags, records)
            missing |= verdict.missing
    return verdicts, frozenset(missing)


async def _after_lookup(ctx: Any, header: Any, req: Any,
                        refused: dict[tuple[str, int], ErrorCode],
                        missing: frozenset[tuple[str, int]]) -> Any:
    validation = ctx.schema_validation
    try:
        await validation.resolve(missing)
    except RegistryUnavailable as exc:
        log.warning("produce from client %r: schema validation cannot check records: %s",
                    header.client_id, exc)
        return await _settled(_produce(ctx, header, req, refused, None, str(exc)))
    verdicts, _ = _judge(validation, validation.topics(ctx.image), req)
    return await _settled(_produce(ctx, header, req, refused, verdicts, None))


def _produce(ctx: Any, header: Any, req: Any, refused: dict[tuple[str, int], ErrorCode],
             verdicts: dict[tuple[str, int], Any] | None, registry_down: str | None) -> Any:
    version = header.api_version
    acks = req.acks
    validating = (ctx.schema_validation.topics(ctx.image)
                  if verdicts is not None or registry_down is not None else None)
    rm = ctx.replica_manager
    results: list[tuple[str | uuid.UUID, list[PartitionResult]]] = []
    # acks=all on a replicated partition: (partition, offset the HW must reach, its leader
    # epoch) and where its result is, for the produce purgatory
    waits: list[tuple[Any, int, int]] = []
    slots: list[tuple[list[PartitionResult], int]] = []
    failed = False
    # issue 16: topics the principal may not write (or the transactional id), by their error
    denied = produce_denials(ctx, header, req) if ctx.authorizer is not None else None
    for topic in req.topics:
        name = topic.name
        out: list[PartitionResult] = []
        key: str | uuid.UUID = name
        if topic.topic_id is not None:
            key = topic.topic_id
            known = ctx.image.topics_by_id.get(topic.topic_id)
            if known is None:
                results.append((key, [PartitionResult(index, ErrorCode.unknown_topic_id, -1)
                                      for index, _ in topic.partitions]))
                failed = True
                continue
            name = known.name
        for index, records in topic.partitions:
            if denied and name in denied:
                out.append(PartitionResult(index, denied[name], -1))
                failed = True
                continue
            if acks not in _VALID_ACKS:
                out.append(PartitionResult(index, ErrorCode.invalid_required_acks, -1))
                failed = True
                continue
            part = rm.get(name, index)
            if part is None:
                code = (rm.missing_partition_error(name, index) if valid_topic_name(name)
                        else ErrorCode.invalid_topic_exception)
                out.append(PartitionResult(index, code, -1))
                failed = True
                log.debug("produce to %s-%d from client %r: %s", name, index, header.client_id,
                         code.name.upper())
                continue
            if name in INTERNAL_TOPICS:
                # as Kafka: clients never append to a coordinator's log
                out.append(PartitionResult(index, ErrorCode.invalid_topic_exception, -1,
                                           error_message=f"Cannot append to internal topic {name}"))
                failed = True
                refusals.note(header, ErrorCode.invalid_topic_exception,
                              f"{name}-{index}: cannot append to an internal topic")
                continue
            if refused and (name, index) in refused:
                out.append(PartitionResult(index, refused[(name, index)], -1))
                failed = True
                continue
            if validating is not None and name in validating:
                refusal = _schema_refusal(index, name, verdicts, registry_down)
                if refusal is not None:
                    out.append(refusal)
                    failed = True
                    refusals.note(header, refusal.error_code,
                                  f"{name}-{index}: {refusal.error_message}")
                    continue
            r = rm.append_to(part, records, acks, version)
            if r.error:
                failed = True
                # a storage error is logged once by the storage layer (rate-limited), not per request
                if r.error != ErrorCode.kafka_storage_error:
                    refusals.note(header, r.error, f"{name}-{index}: {r.message or ''}")
            elif acks == -1 and part.high_watermark <= r.last_offset:
                waits.append((part, r.last_offset + 1, part.leader_epoch))
                slots.append((out, len(out)))
            out.append(PartitionResult(index, r.error, r.base_offset, r.log_append_time_ms,
                                       r.log_start_offset, r.record_errors,
                                       error_message=r.message))
        results.append((key, out))
    # issue 16: producer_byte_rate's throttle, charged by the Dispatcher
    throttle = header.throttle_ms if isinstance(header, SessionHeader) else 0
    if waits:
        return rm.delay_produce(waits, req.timeout_ms,
                                partial(_after_replication, version, results, slots, throttle,
                                        failed))
    if failed:  # errors_total: only a response with an error pays for counting
        refusals.count_codes(0, (r.error_code for _, out in results for r in out),
                             answered=acks != 0)
    if acks == 0:
        if failed:
            # the client expects no answer: closing is the only way to tell it (as Kafka does)
            raise Disconnect("acks=0 produce request had partition errors")
        return None
    return response_header_version(0, version), [
        encode_produce_response(version, results, throttle)]


def _after_replication(version: int,
                       results: list[tuple[str | uuid.UUID, list[PartitionResult]]],
                       slots: list[tuple[list[PartitionResult], int]], throttle: int,
                       failed: bool, errors: list[ErrorCode]) -> Response:
    # acks=all: a batch the ISR did not reach in time is REQUEST_TIMED_OUT (it is in the
    # leader's log; a retry of an idempotent producer is answered as a duplicate)
    for (out, i), code in zip(slots, errors, strict=True):
        if code != ErrorCode.none:
            out[i] = out[i]._replace(error_code=code)
            failed = True
    if failed:
        refusals.count_codes(0, (r.error_code for _, out in results for r in out))
    return response_header_version(0, version), [
        encode_produce_response(version, results, throttle)]


def _schema_refusal(index: int, topic: str, verdicts: dict[tuple[str, int], Any] | None,
                    registry_down: str | None) -> PartitionResult | None:
    if registry_down is not None:  # retriable: nothing appended unchecked
        return PartitionResult(index, ErrorCode.request_timed_out, -1,
                               error_message=f"schema validation: {registry_down}")
    verdict = None if verdicts is None else verdicts.get((topic, index))
    if verdict is None or not verdict.errors:
        return None
    first, message = verdict.errors[0]
    return PartitionResult(
        index, ErrorCode.invalid_record, -1, -1, -1,
        tuple((i, m) for i, m in verdict.errors),
        error_message=f"{len(verdict.errors)} record(s) refused by schema validation, the "
                      f"first at index {first}: {message}")
