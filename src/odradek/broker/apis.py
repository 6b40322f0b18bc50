"""Api key -> handler, and the dispatch the server calls for every request.

The advertised table is built from the handlers registered here, so a client
is never told about an api this node cannot answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from odradek.broker.context import BrokerContext
from odradek.broker.handlers import (
    api_versions,
    cluster,
    configs,
    fetch,
    groups,
    list_offsets,
    metadata,
    partitions,
    produce,
    topics,
    transactions,
)
from odradek.broker.refusals import api_name, refused
from odradek.broker.transport_signals import Disconnect
from odradek.protocol.apis import SUPPORTED, ApiKey
from odradek.protocol.errors import ProtocolError

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
    ApiKey.DESCRIBE_LOG_DIRS: cluster.handle_describe_log_dirs,
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
    ApiKey.INIT_PRODUCER_ID: transactions.handle_init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: transactions.handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: transactions.handle_add_offsets_to_txn,
    ApiKey.END_TXN: transactions.handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: transactions.handle_txn_offset_commit,
    ApiKey.DESCRIBE_TRANSACTIONS: transactions.handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: transactions.handle_list_transactions,
    ApiKey.DESCRIBE_PRODUCERS: transactions.handle_describe_producers,
}

# handlers that also want the client's address (the CLIENT-HOST of group members)
WANTS_PEER = frozenset({groups.handle_join_group, groups.handle_consumer_group_heartbeat})


def advertised_apis() -> dict[int, tuple[int, int]]:
    """The registered handlers with the version ranges the protocol layer serves."""
    missing = [k.name for k in HANDLERS if k not in SUPPORTED]
    if missing:
        log.warning("handlers without a supported version range (not advertised): %s", missing)
    return {int(k): SUPPORTED[k] for k in HANDLERS if k in SUPPORTED}


class Dispatcher:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.table: dict[int, tuple[int, int, Handler]] = {
            k: (lo, hi, HANDLERS[ApiKey(k)]) for k, (lo, hi) in ctx.advertised_apis.items()}

    def __call__(self, conn: Any, frame: memoryview, header: Any) -> Any:
        # refusals that close the connection are logged here (rate-limited, with the client
        # id) and the Disconnect carries no message, so the server does not log them again
        entry = self.table.get(header.api_key)
        if entry is None:
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "UNSUPPORTED_VERSION",
                    "this API is not served by this node; connection closed", conn.peer)
            raise Disconnect("")
        lo, hi, handler = entry
        if not lo <= header.api_version <= hi:
            if header.api_key == ApiKey.API_VERSIONS:
                return api_versions.unsupported(self.ctx, header)
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "UNSUPPORTED_VERSION",
                    f"this node serves versions {lo}-{hi}; connection closed", conn.peer)
            raise Disconnect("")
        try:
            if handler in WANTS_PEER:
                return handler(self.ctx, header, frame, conn.peer)
            return handler(self.ctx, header, frame)
        except ProtocolError as exc:
            api = api_name(header.api_key, header.api_version)
            refused(header.client_id, api, "INVALID_REQUEST",
                    f"malformed request: {exc}; connection closed", conn.peer)
            raise Disconnect("") from None
