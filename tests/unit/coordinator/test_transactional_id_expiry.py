"""transactional.id.expiration.ms: an idle transactional id (no transaction open) is removed
with a tombstone in `__transaction_state`; one with an open transaction stays."""

from __future__ import annotations

from pathlib import Path

from odradek.coordinator.transaction.coordinator import TransactionCoordinator, TxnConfig
from odradek.coordinator.transaction.producer_ids import ProducerIdManager
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.test_txn_offsets_replay import setup

EXPIRY = 5000


def reloaded(node, config: TxnConfig) -> TransactionCoordinator:  # type: ignore[no-untyped-def]
    ids = ProducerIdManager(lambda: node.controller.allocate_producer_ids(1, -1, 1000))
    tc = TransactionCoordinator(node.rm, config, ids, node.coordinator)
    tc.load()
    return tc


def test_idle_transactional_ids_expire(tmp_path: Path) -> None:
    node, _ = setup(tmp_path)
    config = TxnConfig(num_partitions=1, id_expiration_ms=EXPIRY)
    tc = reloaded(node, config)
    idle = tc.init_producer_id("idle", 60000)
    busy = tc.init_producer_id("busy", 60000)
    assert tc.add_partitions("busy", busy.producer_id, busy.producer_epoch,
                             [("data", 0)])[("data", 0)] == ErrorCode.none
    # the idle id's own last update, not the latest of both: "busy" was updated after it
    # (by a millisecond or more on a loaded machine), which would make "idle" expire early
    last = tc.txns["idle"].last_update_ms
    assert tc.expire_ids(now=last + EXPIRY - 1) == 0  # not yet
    assert tc.expire_ids(now=last + EXPIRY + 1) == 1
    assert set(tc.txns) == {"busy"}
    # the tombstone is in the log: a replay agrees
    assert set(reloaded(node, config).txns) == {"busy"}
    # the id starts over with a new producer id
    again = tc.init_producer_id("idle", 60000)
    assert again.error == ErrorCode.none and again.producer_id != idle.producer_id
    node.close()
