"""Requests a broker cannot answer alone go to the active controller (Kafka's forwarding).

In a cluster only the active controller (the raft leader) changes metadata. A broker that gets
an admin request (CreateTopics, DeleteTopics, CreatePartitions, (Incremental)AlterConfigs,
ElectLeaders, partition reassignments, UpdateFeatures) sends its bytes unchanged to the
active controller's controller listener and hands the answer back: the controller listener
serves those APIs itself (as Kafka's does for clients that talk to controllers directly), so
forwarding needs no envelope. The node's own needs go the same way, as requests:
`ControllerLink.create_topics` (auto-created and internal topics), `allocate_producer_ids`
(a block of producer ids, prefetched so the event loop never waits) and `alter_partition`
(a leader's ISR change, for the replica manager). A combined node sends them to itself over
loopback when it is the active controller, as Kafka does: one path for every role.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from odradek.broker.entities import build
from odradek.metadata.controller_requests import CreatableTopic, CreateTopicResult
from odradek.network.channel import ChannelError, Channels
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.headers import response_body_offset
from odradek.protocol.messages import request_class
from odradek.replication.config import AlterPartitionItem, AlterPartitionResult

__all__ = ["FORWARDED_APIS", "ControllerLink"]

log = logging.getLogger(__name__)

# What a broker listener forwards to the active controller (Kafka's forwarded APIs).
FORWARDED_APIS = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
    ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
    ApiKey.UPDATE_FEATURES, ApiKey.DESCRIBE_QUORUM, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CLIENT_QUOTAS,
})
# Errors after which the request goes again, to whoever is the active controller by then.
_RETRY = frozenset({ErrorCode.not_controller, ErrorCode.request_timed_out})
_BACKOFF_S = 0.05


class ControllerLink:
    """The way to the active controller: its id from the quorum, a channel to its listener."""

    def __init__(self, channels: Channels, leader_id: Callable[[], int | None],
                 voters: list[int], node_id: int, *, timeout_s: float = 30.0) -> None:
        self.channels = channels
        self.leader_id = leader_id
        self.voters = sorted(voters)
        self.node_id = node_id
        self.timeout_s = timeout_s
        self.broker_epoch: Callable[[], int] = lambda: -1
        self.loop: asyncio.AbstractEventLoop | None = None
        self._pid_blocks: list[tuple[int, int]] = []
        self._pid_refill: asyncio.Future[None] | None = None
        self._pid_lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    async def active_controller(self, deadline: float) -> int:
        """The raft leader; waits (briefly) while an election is on."""
        while True:
            leader = self.leader_id()
            if leader is not None and leader >= 0:
                return int(leader)
            if time.monotonic() >= deadline:
                raise KafkaError(ErrorCode.not_controller, "no active controller is known")
            await asyncio.sleep(_BACKOFF_S)

    # ---------------------------------------------------------------- raw forwarding

    async def forward(self, header: Any, frame: memoryview,
                      session: Any = None) -> tuple[int, list[bytes]]:
        """Send a client's request body as it is; the controller's response body back. With
        the client's `session` (an authorizer is on) it goes in an Envelope, so the
        controller judges the client, not this broker (envelope.py)."""
        body = bytes(frame[header.body_offset:])
        hv = response_header_version(header.api_key, header.api_version)
        deadline = time.monotonic() + self.timeout_s
        while True:
            target = await self.active_controller(deadline)
            try:
                ch = self.channels.channel(target)
                timeout = max(0.1, deadline - time.monotonic())
                if session is not None:
                    answer = await self._enveloped(ch, frame, session, timeout)
                    if answer is None:  # NOT_CONTROLLER: the next one
                        await asyncio.sleep(_BACKOFF_S)
                        continue
                else:
                    answer = await ch.call(header.api_key, header.api_version, body, timeout)
            except ChannelError as exc:
                if time.monotonic() >= deadline:
                    raise KafkaError(ErrorCode.not_controller, str(exc)) from None
                await asyncio.sleep(_BACKOFF_S)
                continue
            return hv, [answer[response_body_offset(answer, hv):]]

    async def _enveloped(self, ch: Any, frame: memoryview, session: Any,
                         timeout: float) -> bytes | None:
        from kio.schema.envelope.v0.request import EnvelopeRequest

        from odradek.broker.envelope import address_bytes, encode_principal

        response = await ch.request(EnvelopeRequest(
            request_data=bytes(frame), request_principal=encode_principal(session.principal),
            client_host_address=address_bytes(session.client_address)), timeout)
        code = int(response.error_code)
        if code == ErrorCode.not_controller:
            return None
        if code or response.response_data is None:
            raise KafkaError(ErrorCode(code or ErrorCode.unknown_server_error),
                             "the controller refused the forwarded request's envelope")
        return bytes(response.response_data)

    # ---------------------------------------------------------------- requests

    async def request(self, entity: Any, errors_of: Callable[[Any], list[int]] | None = None,
                      timeout_s: float | None = None) -> Any:
        """Send a kio request to the active controller; again (to the new one) on
        NOT_CONTROLLER, a timeout or a lost connection, until `timeout_s`."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while True:
            target = await self.active_controller(deadline)
            try:
                response = await self.channels.request(
                    target, entity, max(0.1, min(5.0, deadline - time.monotonic())))
            except ChannelError as exc:
                if time.monotonic() >= deadline:
                    raise KafkaError(ErrorCode.not_controller,
                                     f"controller {target} unreachable: {exc}") from None
                await asyncio.sleep(_BACKOFF_S)
                continue
            codes = errors_of(response) if errors_of else [int(response.error_code)]
            if any(c in _RETRY for c in codes) and time.monotonic() < deadline:
                await asyncio.sleep(_BACKOFF_S)
                continue
            return response

    def _blocking(self, coro: Any) -> Any:
        """Run a request from a worker thread (the controller-style calls block)."""
        assert self.loop is not None, "ControllerLink.bind(loop) first"
        if _on_loop(self.loop):
            coro.close()
            raise RuntimeError("a blocking controller call on the event loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    # CreateTopics for the node itself: auto-created topics, the internal topics.
    async def create_topics_async(self, specs: list[CreatableTopic], validate_only: bool = False,
                                  ) -> list[CreateTopicResult]:
        cls = request_class(ApiKey.CREATE_TOPICS, 7)
        entity = build(cls, {
            "topics": [{
                "name": s.name, "num_partitions": s.num_partitions,
                "replication_factor": s.replication_factor,
                "assignments": [{"partition_index": p, "broker_ids": tuple(r)}
                                for p, r in sorted((s.assignments or {}).items())],
                "configs": [{"name": k, "value": v} for k, v in s.configs.items()]}
                for s in specs],
            "timeout": int(self.timeout_s * 1000), "validate_only": validate_only})
        response = await self.request(
            entity, lambda r: [int(t.error_code) for t in r.topics])
        return [CreateTopicResult(
            name=t.name, error_code=ErrorCode(int(t.error_code)), error_message=t.error_message,
            topic_id=t.topic_id, num_partitions=int(t.num_partitions),
            replication_factor=int(t.replication_factor)) for t in response.topics]

    def create_topics(self, specs: list[CreatableTopic], validate_only: bool = False,
                      ) -> list[CreateTopicResult]:
        return self._blocking(self.create_topics_async(specs, validate_only))  # type: ignore[no-any-return]

    async def allocate_producer_ids_async(self, block_size: int = 1000) -> tuple[int, int]:
        cls = request_class(ApiKey.ALLOCATE_PRODUCER_IDS, 0)
        entity = build(cls, {"broker_id": self.node_id, "broker_epoch": self.broker_epoch()})
        response = await self.request(entity)
        if int(response.error_code) != 0:
            raise KafkaError(ErrorCode(int(response.error_code)),
                             "the controller refused a producer id block")
        return int(response.producer_id_start), int(response.producer_id_len)

    def allocate_producer_ids(self, broker_id: int = -1, broker_epoch: int = -1,
                              block_size: int = 1000) -> tuple[int, int]:
        """A block of producer ids. On a worker thread: asks and waits. On the event loop
        (the transaction coordinator hands ids out there): a block fetched ahead, and the
        next one asked for at once; none yet -> COORDINATOR_NOT_AVAILABLE, which clients
        retry."""
        assert self.loop is not None
        if not _on_loop(self.loop):
            return self._blocking(self.allocate_producer_ids_async(block_size))  # type: ignore[no-any-return]
        with self._pid_lock:
            block = self._pid_blocks.pop(0) if self._pid_blocks else None
        self.prefetch_producer_ids()
        if block is None:
            raise KafkaError(ErrorCode.coordinator_not_available,
                             "no producer id block from the controller yet")
        return block

    def prefetch_producer_ids(self) -> None:
        if self._pid_refill is not None and not self._pid_refill.done():
            return
        if self._pid_blocks:
            return

        async def refill() -> None:
            try:
                block = await self.allocate_producer_ids_async()
            except Exception as exc:
                log.warning("no producer id block from the controller: %s", exc)
                return
            with self._pid_lock:
                self._pid_blocks.append(block)

        assert self.loop is not None
        self._pid_refill = asyncio.run_coroutine_threadsafe(refill(), self.loop)  # type: ignore[assignment]

    # AlterPartition for the replica manager (a leader's ISR change).
    async def alter_partition(self, item: AlterPartitionItem) -> AlterPartitionResult:
        """A leader's ISR change (replication's `alter_partition`), as AlterPartition v3."""
        cls = request_class(ApiKey.ALTER_PARTITION, 3)
        entity = build(cls, {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "topics": [{"topic_id": item.topic_id, "partitions": [{
                "partition_index": item.partition, "leader_epoch": item.leader_epoch,
                "new_isr_with_epochs": [{"broker_id": b,
                                         "broker_epoch": item.broker_epochs.get(b, -1)}
                                        for b in item.new_isr],
                "leader_recovery_state": 0,
                "partition_epoch": item.partition_epoch}]}]})
        try:
            response = await self.request(entity, timeout_s=10.0)
        except KafkaError as exc:
            return AlterPartitionResult(exc.code)
        if int(response.error_code) != 0:
            return AlterPartitionResult(ErrorCode(int(response.error_code)))
        for topic in response.topics:
            for p in topic.partitions:
                if int(p.partition_index) == item.partition:
                    return AlterPartitionResult(
                        ErrorCode(int(p.error_code)), int(p.leader_id), int(p.leader_epoch),
                        int(p.partition_epoch), tuple(int(b) for b in p.isr))
        return AlterPartitionResult(ErrorCode.unknown_server_error)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


class RemoteController:
    """What a broker's handlers and coordinators see as `ctx.controller` in a cluster: the
    committed image from the publisher, the static config with the image's dynamic configs,
    and the controller operations the node itself needs, over `ControllerLink`."""

    def __init__(self, link: ControllerLink, publisher: Any, quorum: Any,
                 static_config: Any, node_id: int) -> None:
        self.link = link
        self.publisher = publisher
        self.quorum = quorum
        self.static_config = static_config
        self.node_id = node_id

    @property
    def image(self) -> Any:
        return self.publisher.image

    @property
    def broker_config(self) -> Any:
        image = self.image
        return self.static_config.with_dynamic(image.broker_configs(self.node_id),
                                               image.broker_configs(""))

    def create_topics(self, specs: list[CreatableTopic], validate_only: bool = False,
                      ) -> list[CreateTopicResult]:
        return self.link.create_topics(specs, validate_only)

    def allocate_producer_ids(self, broker_id: int = -1, broker_epoch: int = -1,
                              block_size: int = 1000) -> tuple[int, int]:
        return self.link.allocate_producer_ids(broker_id, broker_epoch, block_size)

