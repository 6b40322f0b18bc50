"""InitProducerId and (later) the transaction apis.

Idempotent producers (no transactional id) always get a fresh producer id with epoch 0,
as Kafka's TransactionCoordinator does for them, also when they present their old id
and epoch to recover from an error (KIP-360): a new id makes every old sequence moot.
"""

from __future__ import annotations

import logging
from typing import Any

from odradek.broker.entities import ms
from odradek.broker.handlers.common import Response, decode, respond
from odradek.coordinator.transaction.producer_ids import BLOCK_SIZE, ProducerIdManager
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = ErrorCode


# BrokerContext has slots: the node's producer id manager lives here, one per context
_MANAGERS: dict[int, ProducerIdManager] = {}


def _manager(ctx: Any) -> ProducerIdManager:
    manager = _MANAGERS.get(id(ctx))
    if manager is None:
        controller, node_id = ctx.controller, ctx.node_id

        def allocate() -> tuple[int, int]:
            return controller.allocate_producer_ids(node_id, -1, BLOCK_SIZE)

        manager = _MANAGERS[id(ctx)] = ProducerIdManager(allocate)
    return manager


def handle_init_producer_id(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    txn_id = req.transactional_id
    if txn_id is not None:
        coordinator = getattr(ctx, "transaction_coordinator", None)
        if coordinator is None:
            return respond(header, {"throttle_time": 0, "error_code": E.not_coordinator,
                                    "producer_id": -1, "producer_epoch": -1})
        return coordinator.init_producer_id(header, req, ms(req.transaction_timeout))
    try:
        pid = _manager(ctx).generate()
    except Exception:
        log.exception("allocating a producer id block failed")
        return respond(header, {"throttle_time": 0, "error_code": E.coordinator_not_available,
                                "producer_id": -1, "producer_epoch": -1})
    return respond(header, {"throttle_time": 0, "error_code": E.none, "producer_id": pid,
                            "producer_epoch": 0})
