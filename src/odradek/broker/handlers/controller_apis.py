"""The controller listener's cluster APIs: BrokerRegistration (62), BrokerHeartbeat (63),
AlterPartition (56), ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46), UpdateFeatures (57), UnregisterBroker (64) and
AllocateProducerIds (67) and AssignReplicasToDirs (73).

Each decodes the request into the controller's plain types (metadata.controller_requests),
runs the operation in a worker thread (it appends to the quorum and blocks until committed),
and encodes the answer. The controller is `ctx.controller`; a node without one, or one that
is not the active controller, answers NOT_CONTROLLER so the sender looks for the active one.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from odradek.broker.authz import cluster_allowed
from odradek.broker.handlers.common import Response, decode, respond
from odradek.metadata.acls import AclOperation as Op
from odradek.metadata.controller_requests import (
    AlterPartitionItem,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    FeatureUpdate,
    ReassignmentTarget,
)
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["HANDLERS", "VERSIONS"]

log = logging.getLogger(__name__)

VERSIONS = (
    ApiVersionRange(ApiKey.BROKER_REGISTRATION, 0, 4),
    ApiVersionRange(ApiKey.BROKER_HEARTBEAT, 0, 1),
    ApiVersionRange(ApiKey.ALTER_PARTITION, 2, 3),  # kio reads v2+ (topic ids)
    ApiVersionRange(ApiKey.ELECT_LEADERS, 0, 2),
    ApiVersionRange(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0),
    ApiVersionRange(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0),
    ApiVersionRange(ApiKey.UPDATE_FEATURES, 0, 2),  # v2 (Kafka 4.0): no per-feature results
    ApiVersionRange(ApiKey.UNREGISTER_BROKER, 0, 0),
    ApiVersionRange(ApiKey.ALLOCATE_PRODUCER_IDS, 0, 0),
    ApiVersionRange(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, 0),
)

_NOT_CONTROLLER = KafkaError(ErrorCode.not_controller, "This node is not the active controller.")


async def _run(ctx: Any, operation: str, *args: Any) -> Any:
    """A controller operation, by name, in a worker thread (the controller's lock orders
    them); NOT_CONTROLLER on a node without a controller."""
    controller = getattr(ctx, "controller", None)
    if controller is None:
        raise _NOT_CONTROLLER
    return await asyncio.to_thread(getattr(controller, operation), *args)


def _need(ctx: Any, header: Any, op: Op) -> None:
    """Kafka's ControllerApis checks: ClusterAction for what only the cluster's own nodes
    send (registration, heartbeats, AlterPartition, producer id blocks), Alter to unregister
    a broker; CLUSTER_AUTHORIZATION_FAILED otherwise."""
    if not cluster_allowed(ctx, header, op):
        raise KafkaError(ErrorCode.cluster_authorization_failed,
                         f"the principal lacks {op.name.title().replace('_', '')} on the "
                         "cluster")


def _error(exc: KafkaError) -> tuple[ErrorCode, str | None]:
    return ErrorCode(exc.code), exc.message or None


# ---------------------------------------------------------------- brokers


def handle_broker_registration(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    request = BrokerRegistrationRequest(
        broker_id=int(req.broker_id),
        cluster_id=req.cluster_id,
        incarnation_id=req.incarnation_id or uuid.UUID(int=0),
        listeners=[(lst.name, lst.host, int(lst.port), int(lst.security_protocol))
                   for lst in req.listeners],
        features=[(f.name, int(f.min_supported_version), int(f.max_supported_version))
                  for f in req.features],
        rack=req.rack,
        is_migrating_zk_broker=bool(getattr(req, "is_migrating_zk_broker", False)),
        log_dirs=[d for d in getattr(req, "log_dirs", ()) if d is not None],
        previous_broker_epoch=int(getattr(req, "previous_broker_epoch", -1)),
    )
    return _broker_registration(ctx, header, request)


async def _broker_registration(ctx: Any, header: Any, request: BrokerRegistrationRequest
                               ) -> Response:
    try:
        _need(ctx, header, Op.CLUSTER_ACTION)
        reply = await _run(ctx, "register_broker", request)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code, "broker_epoch": -1})
    return respond(header, {"throttle_time": 0, "error_code": reply.error_code,
                            "broker_epoch": reply.broker_epoch})


def handle_broker_heartbeat(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    request = BrokerHeartbeatRequest(
        broker_id=int(req.broker_id), broker_epoch=int(req.broker_epoch),
        current_metadata_offset=int(req.current_metadata_offset),
        want_fence=bool(req.want_fence), want_shut_down=bool(req.want_shut_down),
        offline_log_dirs=[d for d in getattr(req, "offline_log_dirs", ()) or ()
                          if d is not None])
    return _broker_heartbeat(ctx, header, request)


async def _broker_heartbeat(ctx: Any, header: Any, request: BrokerHeartbeatRequest) -> Response:
    try:
        _need(ctx, header, Op.CLUSTER_ACTION)
        reply = await _run(ctx, "broker_heartbeat", request)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code,
                                "is_caught_up": False, "is_fenced": True,
                                "should_shut_down": False})
    return respond(header, {"throttle_time": 0, "error_code": reply.error_code,
                            "is_caught_up": reply.is_caught_up, "is_fenced": reply.is_fenced,
                            "should_shut_down": reply.should_shut_down})


def handle_unregister_broker(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _unregister_broker(ctx, header, int(req.broker_id))


async def _unregister_broker(ctx: Any, header: Any, broker_id: int) -> Response:
    try:
        _need(ctx, header, Op.ALTER)
        await _run(ctx, "unregister_broker", broker_id)
    except KafkaError as exc:
        code, message = _error(exc)
        return respond(header, {"throttle_time": 0, "error_code": code, "error_message": message})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "error_message": None})


def handle_allocate_producer_ids(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    return _allocate_producer_ids(ctx, header, int(req.broker_id), int(req.broker_epoch))


async def _allocate_producer_ids(ctx: Any, header: Any, broker_id: int,
                                 broker_epoch: int) -> Response:
    try:
        _need(ctx, header, Op.CLUSTER_ACTION)
        first, size = await _run(ctx, "allocate_producer_ids", broker_id,
                                 broker_epoch)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code,
                                "producer_id_start": -1, "producer_id_len": 0})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "producer_id_start": first, "producer_id_len": size})


# ---------------------------------------------------------------- partitions


def handle_alter_partition(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    items = []
    for t in req.topics:
        for p in t.partitions:
            if header.api_version >= 3:
                isr = [(int(b.broker_id), int(b.broker_epoch)) for b in p.new_isr_with_epochs]
            else:
                isr = [(int(b), -1) for b in p.new_isr]
            items.append(AlterPartitionItem(
                topic_id=t.topic_id or uuid.UUID(int=0), partition=int(p.partition_index),
                leader_epoch=int(p.leader_epoch), partition_epoch=int(p.partition_epoch),
                new_isr=isr, leader_recovery_state=int(p.leader_recovery_state)))
    return _alter_partition(ctx, header, int(req.broker_id), int(req.broker_epoch), items)


async def _alter_partition(ctx: Any, header: Any, broker_id: int, broker_epoch: int,
                           items: list[AlterPartitionItem]) -> Response:
    try:
        _need(ctx, header, Op.CLUSTER_ACTION)
        results = await _run(ctx, "alter_partition", broker_id, broker_epoch,
                             items, header.api_version)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code, "topics": []})
    topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for item, r in zip(items, results, strict=True):
        topics.setdefault(item.topic_id, []).append({
            "partition_index": r.partition, "error_code": r.error_code,
            "leader_id": r.leader_id, "leader_epoch": r.leader_epoch, "isr": r.isr,
            "leader_recovery_state": r.leader_recovery_state,
            "partition_epoch": r.partition_epoch})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none, "topics": [
        {"topic_id": tid, "partitions": parts} for tid, parts in topics.items()]})


def handle_elect_leaders(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, Op.ALTER):
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                                "replica_election_results": []})
    election_type = int(getattr(req, "election_type", 0))
    partitions = (None if req.topic_partitions is None else
                  [(t.topic, int(p)) for t in req.topic_partitions for p in t.partitions])
    return _elect_leaders(ctx, header, election_type, partitions)


async def _elect_leaders(ctx: Any, header: Any, election_type: int,
                         partitions: list[tuple[str, int]] | None) -> Response:
    try:
        results = await _run(ctx, "elect_leaders", election_type, partitions)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code,
                                "replica_election_results": []})
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append({
            "partition_id": r.partition, "error_code": r.error_code,
            "error_message": r.error_message})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "replica_election_results": [
                                {"topic": t, "partition_result": parts}
                                for t, parts in by_topic.items()]})


# ---------------------------------------------------------------- reassignments


def handle_alter_partition_reassignments(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, Op.ALTER):
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                                "error_message": None, "responses": []})
    targets = [ReassignmentTarget(t.name, int(p.partition_index),
                                  None if p.replicas is None else [int(b) for b in p.replicas])
               for t in req.topics for p in t.partitions]
    return _alter_reassignments(ctx, header, targets)


async def _alter_reassignments(ctx: Any, header: Any,
                               targets: list[ReassignmentTarget]) -> Response:
    try:
        results = await _run(ctx, "alter_partition_reassignments", targets)
    except KafkaError as exc:
        code, message = _error(exc)
        return respond(header, {"throttle_time": 0, "error_code": code,
                                "error_message": message, "responses": []})
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append({
            "partition_index": r.partition, "error_code": r.error_code,
            "error_message": r.error_message})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "error_message": None, "responses": [
                                {"name": t, "partitions": parts}
                                for t, parts in by_topic.items()]})


def handle_list_partition_reassignments(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, Op.DESCRIBE):
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                                "error_message": None, "topics": []})
    partitions = (None if req.topics is None else
                  [(t.name, int(p)) for t in req.topics for p in t.partition_indexes])
    return _list_reassignments(ctx, header, partitions)


async def _list_reassignments(ctx: Any, header: Any,
                              partitions: list[tuple[str, int]] | None) -> Response:
    try:
        controller = getattr(ctx, "controller", None)
        if controller is None or not controller.is_active:
            raise _NOT_CONTROLLER
        ongoing = controller.list_partition_reassignments(partitions)
    except KafkaError as exc:
        code, message = _error(exc)
        return respond(header, {"throttle_time": 0, "error_code": code,
                                "error_message": message, "topics": []})
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for o in ongoing:
        by_topic.setdefault(o.topic, []).append({
            "partition_index": o.partition, "replicas": o.replicas,
            "adding_replicas": o.adding_replicas, "removing_replicas": o.removing_replicas})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "error_message": None, "topics": [
                                {"name": t, "partitions": parts}
                                for t, parts in by_topic.items()]})


# ---------------------------------------------------------------- features


def handle_update_features(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    if not cluster_allowed(ctx, header, Op.ALTER):
        return respond(header, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                                "error_message": None, "results": [
                                    {"feature": u.feature, "error_code": ErrorCode.cluster_authorization_failed,
                                     "error_message": None} for u in req.feature_updates]})
    updates = []
    for u in req.feature_updates:
        if header.api_version >= 1:
            upgrade_type = int(u.upgrade_type)
        else:  # v0: allow_downgrade means a safe downgrade (Kafka's mapping)
            upgrade_type = 2 if u.allow_downgrade else 1
        updates.append(FeatureUpdate(u.feature, int(u.max_version_level), upgrade_type))
    return _update_features(ctx, header, updates, bool(getattr(req, "validate_only", False)))


async def _update_features(ctx: Any, header: Any, updates: list[FeatureUpdate],
                           validate_only: bool) -> Response:
    try:
        results = await _run(ctx, "update_features", updates, validate_only)
    except KafkaError as exc:
        code, message = _error(exc)
        return respond(header, {"throttle_time": 0, "error_code": code,
                                "error_message": message, "results": [
                                    {"feature": u.feature, "error_code": code,
                                     "error_message": message} for u in updates]})
    # all or nothing: the first failure is the request's error, as Kafka's controller says
    failed = next((r for r in results if r.error_code != ErrorCode.none), None)
    return respond(header, {
        "throttle_time": 0,
        "error_code": ErrorCode.none if failed is None else failed.error_code,
        "error_message": None if failed is None else failed.error_message,
        "results": [{"feature": r.feature, "error_code": r.error_code,
                     "error_message": r.error_message} for r in results]})


# ---------------------------------------------------------------- log directories (KIP-858)

_ZERO = uuid.UUID(int=0)  # kio reads an all-zero uuid (MIGRATING) as None


def handle_assign_replicas_to_dirs(ctx: Any, header: Any, frame: memoryview) -> Any:
    req = decode(header, frame)
    assignments: dict[uuid.UUID, list[tuple[uuid.UUID, int]]] = {}
    for d in req.directories:
        replicas = assignments.setdefault(d.id_ or _ZERO, [])
        replicas += [(t.topic_id or _ZERO, int(p.partition_index))
                     for t in d.topics for p in t.partitions]
    return _assign_replicas_to_dirs(ctx, header, int(req.broker_id), int(req.broker_epoch),
                                    assignments)


async def _assign_replicas_to_dirs(ctx: Any, header: Any, broker_id: int, broker_epoch: int,
                                   assignments: dict[uuid.UUID, list[tuple[uuid.UUID, int]]]
                                   ) -> Response:
    try:
        _need(ctx, header, Op.CLUSTER_ACTION)
        results = await _run(ctx, "assign_replicas_to_dirs", broker_id, broker_epoch,
                             assignments)
    except KafkaError as exc:
        return respond(header, {"throttle_time": 0, "error_code": exc.code,
                                "directories": []})
    directories = []
    for directory, replicas in assignments.items():
        topics: dict[uuid.UUID, list[dict[str, Any]]] = {}
        for topic_id, index in replicas:
            topics.setdefault(topic_id, []).append({
                "partition_index": index,
                "error_code": results.get((directory, topic_id, index), ErrorCode.none)})
        directories.append({"id_": directory, "topics": [
            {"topic_id": tid, "partitions": parts} for tid, parts in topics.items()]})
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "directories": directories})


HANDLERS: dict[ApiKey, Callable[[Any, Any, memoryview], Any]] = {
    ApiKey.BROKER_REGISTRATION: handle_broker_registration,
    ApiKey.BROKER_HEARTBEAT: handle_broker_heartbeat,
    ApiKey.ALTER_PARTITION: handle_alter_partition,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.UPDATE_FEATURES: handle_update_features,
    ApiKey.UNREGISTER_BROKER: handle_unregister_broker,
    ApiKey.ALLOCATE_PRODUCER_IDS: handle_allocate_producer_ids,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: handle_assign_replicas_to_dirs,
}
