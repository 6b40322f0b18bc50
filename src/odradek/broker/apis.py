"""Api key -> handler, and the dispatch the server calls for every request.

Each handler module declares the versions it serves (its `VERSIONS`, next to the
handlers); the advertised table and the routing table are built from those declarations
for the api keys routed here, so a client is never told about an api this node cannot
answer, and the numbers live in one place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from odradek.broker import envelope
from odradek.broker.authz import charge_request_time, guarded, session_of
from odradek.broker.context import BrokerContext
from odradek.broker.forwarding import FORWARDED_APIS
from odradek.broker.handlers import (
    acls,
    api_versions,
    cluster,
    configs,
    controller_apis,
    fetch,
    groups,
    list_offsets,
    log_dirs,
    metadata,
    partitions,
    produce,
    quotas,
    raft,
    sasl,
    scram,
    share,
    share_admin,
    share_state,
    topic_partitions,
    topics,
    transactions,
    txn_markers,
)
from odradek.broker.handlers.coordinator_errors import not_replicated_answer
from odradek.broker.refusals import api_name, refused
from odradek.broker.transport_signals import Disconnect
from odradek.coordinator.runtime import WriteNotReplicated
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger(__name__)

Handler = Callable[[BrokerContext, Any, memoryview], Any]

HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.PRODUCE: produce.handle,
    ApiKey.FETCH: fetch.handle,
    ApiKey.LIST_OFFSETS: list_offsets.handle,
    ApiKey.METADATA: metadata.handle,
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKey.DELETE_RECORDS: partitions.handle_delete_records,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: partitions.handle_offset_for_leader_epoch,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe_log_dirs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter_replica_log_dirs,
    ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.FIND_COORDINATOR: groups.handle_find_coordinator,
    ApiKey.JOIN_GROUP: groups.handle_join_group,
    ApiKey.SYNC_GROUP: groups.handle_sync_group,
    ApiKey.HEARTBEAT: groups.handle_heartbeat,
    ApiKey.LEAVE_GROUP: groups.handle_leave_group,
    ApiKey.OFFSET_COMMIT: groups.handle_offset_commit,
    ApiKey.OFFSET_FETCH: groups.handle_offset_fetch,
    ApiKey.DESCRIBE_GROUPS: groups.handle_describe_groups,
    ApiKey.LIST_GROUPS: groups.handle_list_groups,
    ApiKey.DELETE_GROUPS: groups.handle_delete_groups,
    ApiKey.OFFSET_DELETE: groups.handle_offset_delete,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: groups.handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: groups.handle_consumer_group_describe,
    # issue 20: share groups (KIP-932)
    ApiKey.SHARE_GROUP_HEARTBEAT: share.handle_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: share.handle_describe,
    ApiKey.SHARE_FETCH: share.handle_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: share.handle_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_admin.handle_describe_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_admin.handle_alter_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_admin.handle_delete_offsets,
    # the share-group state persister RPCs, node to node (ClusterAction)
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: share_state.handle_initialize,
    ApiKey.READ_SHARE_GROUP_STATE: share_state.handle_read,
    ApiKey.WRITE_SHARE_GROUP_STATE: share_state.handle_write,
    ApiKey.DELETE_SHARE_GROUP_STATE: share_state.handle_delete,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: share_state.handle_summary,
    ApiKey.INIT_PRODUCER_ID: transactions.handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: transactions.handle_txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
    # inter-broker: a transaction coordinator's markers for the partitions this node leads
    ApiKey.WRITE_TXN_MARKERS: txn_markers.handle_write_txn_markers,
    # the cluster's admin APIs: answered here on a single node, forwarded to the active
    # controller in a cluster (Dispatcher, FORWARDED_APIS)
    ApiKey.ELECT_LEADERS: controller_apis.handle_elect_leaders,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: controller_apis.handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: controller_apis.handle_list_partition_reassignments,
    ApiKey.UPDATE_FEATURES: controller_apis.handle_update_features,
    ApiKey.DESCRIBE_QUORUM: raft.handle_describe_quorum,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: topic_partitions.handle,
    ApiKey.LIST_CONFIG_RESOURCES: configs.handle_list_config_resources,
    ApiKey.CREATE_ACLS: acls.handle_create_acls,
    ApiKey.DESCRIBE_ACLS: acls.handle_describe_acls,
    ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    ApiKey.ALTER_CLIENT_QUOTAS: quotas.handle_alter_client_quotas,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas.handle_describe_client_quotas,
    ApiKey.SASL_HANDSHAKE: sasl.handle_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram.handle_alter,
}

# The controller listener (issue 14): the KRaft APIs, broker registration and heartbeats, the
# leaders' AlterPartition, and the admin APIs brokers forward (served here by the controller,
# as Kafka's controller listener serves them).
CONTROLLER_HANDLERS: dict[ApiKey, Handler] = {
    ApiKey.API_VERSIONS: api_versions.handle,
    ApiKey.VOTE: raft.handle_vote,
    ApiKey.BEGIN_QUORUM_EPOCH: raft.handle_begin_quorum_epoch,
    ApiKey.END_QUORUM_EPOCH: raft.handle_end_quorum_epoch,
    ApiKey.FETCH: raft.handle_metadata_fetch,
    ApiKey.FETCH_SNAPSHOT: raft.handle_fetch_snapshot,
    ApiKey.DESCRIBE_QUORUM: raft.handle_describe_quorum,
    **controller_apis.HANDLERS,
    ApiKey.CREATE_TOPICS: topics.handle_create_topics,
    ApiKey.DELETE_TOPICS: topics.handle_delete_topics,
    ApiKey.CREATE_PARTITIONS: topics.handle_create_partitions,
    ApiKey.ALTER_CONFIGS: configs.handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.handle_incremental_alter_configs,
    ApiKey.DESCRIBE_CONFIGS: configs.handle_describe_configs,
    ApiKey.DESCRIBE_CLUSTER: cluster.handle_describe_cluster,
    ApiKey.CREATE_ACLS: acls.handle_create_acls,
    ApiKey.DELETE_ACLS: acls.handle_delete_acls,
    ApiKey.ALTER_CLIENT_QUOTAS: quotas.handle_alter_client_quotas,
    ApiKey.SASL_HANDSHAKE: sasl.handle_handshake,
    ApiKey.SASL_AUTHENTICATE: sasl.handle_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram.handle_describe,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram.handle_alter,
    # issue 16: a broker's forwarded request with its client's principal (Dispatcher runs
    # the inner request through this table: envelope.serve_envelope)
    ApiKey.ENVELOPE: envelope.serve_envelope,
}

# the APIs whose coordinator writes their answer waits for (CoordinatorRuntime.durably)
COORDINATOR_WRITES = frozenset({
    ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.OFFSET_COMMIT, ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE,
    ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_FETCH, ApiKey.SHARE_ACKNOWLEDGE,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS})

# what a table entry's calls need beyond handler(ctx, header, frame)
_PEER, _FORWARD, _DURABLE, _ENVELOPE = 1, 2, 4, 8

# handlers that also want the client's address (the CLIENT-HOST of group members)
WANTS_PEER = frozenset({groups.handle_join_group, groups.handle_consumer_group_heartbeat,
                        share.handle_heartbeat})


# the handler modules whose VERSIONS declare what HANDLERS routes
HANDLER_MODULES = (acls, api_versions, cluster, configs, controller_apis, fetch, groups,
                   list_offsets, log_dirs, metadata, partitions, produce, quotas, raft, sasl, scram,
                   share, share_admin, share_state, topic_partitions, topics, transactions,
                   txn_markers, envelope)
# a Fetch on the controller listener is a metadata fetch: raft's versions, not fetch.py's
_CONTROLLER_OVERRIDES = {ApiKey.FETCH: raft.METADATA_FETCH_VERSIONS}


def declarations(handlers: dict[ApiKey, Handler] | None = None) -> list[ApiVersionRange]:
    """Every version range the handler modules declare for the api keys of `handlers`
    (default: the client listener's), in module order (duplicates kept, so a test can see
    them)."""
    routed = HANDLERS if handlers is None else handlers
    return [decl for module in HANDLER_MODULES for decl in module.VERSIONS
            if decl.api_key in routed]


def advertised_apis(handlers: dict[ApiKey, Handler] | None = None) -> dict[int, tuple[int, int]]:
    """The routed api keys with the version ranges their handler modules declare."""
    handlers = HANDLERS if handlers is None else handlers
    declared = {d.api_key: (d.min_version, d.max_version) for d in declarations(handlers)}
    if handlers is CONTROLLER_HANDLERS:
        declared.update(_CONTROLLER_OVERRIDES)
    missing = [k.name for k in handlers if k not in declared]
    if missing:
        log.warning("handlers without a declared version range (not advertised): %s", missing)
    return {int(k): declared[k] for k in handlers if k in declared}


class Dispatcher:
    """Routes a listener's requests. `handlers` is the listener kind's table (HANDLERS for the
    client listeners, CONTROLLER_HANDLERS for the controller's). On a broker in a cluster
    (`ctx.link` set, `forward=True`) the admin APIs go to the active controller as they are."""

    def __init__(self, ctx: BrokerContext, handlers: dict[ApiKey, Handler] | None = None,
                 forward: bool = False) -> None:
        self.ctx = ctx
        handlers = HANDLERS if handlers is None else handlers
        self.forward = forward and ctx.link is not None
        # each entry carries what its calls need beyond handler(ctx, header, frame), so the
        # produce and fetch hot paths pay one test, not one per kind
        self.table: dict[int, tuple[int, int, Handler, int]] = {}
        for k, (lo, hi) in ctx.advertised_apis.items():
            handler = handlers[ApiKey(k)]
            kind = ((_PEER if handler in WANTS_PEER else 0)
                    | (_FORWARD if self.forward and k in FORWARDED_APIS else 0)
                    | (_DURABLE if k in COORDINATOR_WRITES else 0)
                    | (_ENVELOPE if k == ApiKey.ENVELOPE else 0))
            self.table[k] = (lo, hi, handler, kind)
        # issue 16: with an authorizer or client quotas, handlers get the request's Session
        # on its header (and produce is charged against its quota before it runs)
        self.secured = ctx.authorizer is not None
        self.quotas = ctx.quotas

    def __call__(self, conn: Any, frame: memoryview, header: Any, inner: bool = False) -> Any:
        # issue 16: with ACLs or client quotas the request goes round _guarded first (which
        # calls back with inner=True); without, this test is all the hot path pays
        if not inner and (self.secured or self.quotas.active):
            return self._guarded(conn, frame, header)
        # refusals that close the connection are logged here (rate-limited, with the client
        # id) and the Disconnect carries no message, so the server does not log them again
        entry = self.table.get(header.api_key)
        if entry is None:
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "UNSUPPORTED_VERSION",
                    "this API is not served by this node; connection closed", conn.peer)
            raise Disconnect("")
        lo, hi, handler, kind = entry
        if not lo <= header.api_version <= hi:
            if header.api_key == ApiKey.API_VERSIONS:
                return api_versions.unsupported(self.ctx, header)
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "UNSUPPORTED_VERSION",
                    f"this node serves versions {lo}-{hi}; connection closed", conn.peer)
            raise Disconnect("")
        try:
            if not kind:
                return handler(self.ctx, header, frame)
            return self._special(kind, handler, header, frame, conn)
        except ProtocolError as exc:
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "INVALID_REQUEST",
                    f"malformed request: {exc}; connection closed", conn.peer)
            raise Disconnect("") from None

    def _inner(self, conn: Any, frame: memoryview, header: Any) -> Any:
        """An enveloped request, its header carrying its client's Session already."""
        return self(conn, frame, header, True)

    def _guarded(self, conn: Any, frame: memoryview, header: Any) -> Any:
        header = guarded(self.ctx, header, conn, frame)
        started = time.perf_counter()
        try:
            return self(conn, frame, header, True)
        finally:
            charge_request_time(self.ctx, header, time.perf_counter() - started)

    def _special(self, kind: int, handler: Handler, header: Any, frame: memoryview,
                 conn: Any) -> Any:
        if kind & _FORWARD:
            # with an authorizer the controller must judge the client, not this broker:
            # the request goes in an Envelope with the client's principal (envelope.py)
            return self.ctx.link.forward(header, frame,
                                         session_of(header) if self.secured else None)
        if kind & _ENVELOPE:
            return envelope.serve_envelope(self.ctx, header, frame, conn, self._inner)
        coordinator = self.ctx.group_coordinator
        if kind & _DURABLE and coordinator is not None:
            # issue 14: answered once the coordinator's writes are in the ISR (acks=all)
            return _replicated(coordinator.runtime.durably(
                lambda: self._call(kind, handler, header, frame, conn)), header, frame)
        return self._call(kind, handler, header, frame, conn)

    def _call(self, kind: int, handler: Handler, header: Any, frame: memoryview,
              conn: Any) -> Any:
        if kind & _PEER:
            return handler(self.ctx, header, frame, conn.peer)
        return handler(self.ctx, header, frame)


def _replicated(result: Any, header: Any, frame: memoryview) -> Any:
    if not asyncio.iscoroutine(result):
        return result

    async def answer() -> Any:
        try:
            return await result
        except WriteNotReplicated as exc:
            # never acknowledge what the ISR may not have: Kafka's retriable coordinator
            # error instead (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE)
            log.info("%s: coordinator write not replicated (%s); answering %s",
                     api_name(header.api_key, header.api_version), exc,
                     ErrorCode(exc.code).name.upper())
            response = not_replicated_answer(header, frame, exc.code)
            if response is None:
                raise Disconnect(f"coordinator write not replicated: {exc}") from None
            return response

    return answer()
