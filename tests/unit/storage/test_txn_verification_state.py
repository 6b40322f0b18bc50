"""KIP-890's verification on a partition belongs to one transaction (finding 14): the first
batch spends it, the transaction's marker drops it, and an answer the coordinator gave
while a marker came in between counts for nothing (the guard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.records import ATTR_CONTROL, ATTR_TRANSACTIONAL
from odradek.storage.producer_state import CONTROL_ABORT, CONTROL_COMMIT, ProducerStateManager

PID = 2000
TXN = ATTR_TRANSACTIONAL


def batch(state: ProducerStateManager, offset: int, seq: int, epoch: int = 0) -> None:
    assert state.check(PID, epoch, seq, 0, TXN) is None
    state.on_append(PID, epoch, seq, 0, TXN, offset, offset, 0)


def marker(state: ProducerStateManager, offset: int, commit: bool, epoch: int = 0) -> None:
    state.on_append(PID, epoch, -1, 0, TXN | ATTR_CONTROL, offset, offset, 0,
                    CONTROL_COMMIT if commit else CONTROL_ABORT, 0)


def refused(state: ProducerStateManager, seq: int, epoch: int = 0) -> None:
    with pytest.raises(KafkaError) as err:
        state.check(PID, epoch, seq, 0, TXN)
    assert err.value.code == ErrorCode.invalid_txn_state


def test_a_second_transaction_of_one_epoch_is_verified_again(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    refused(state, 0)
    state.mark_verified(PID, 0)
    batch(state, 0, 0)
    # spent by the first batch; the open transaction admits the rest
    assert not state.is_verified(PID, 0)
    batch(state, 1, 1)
    marker(state, 2, commit=True)
    assert state.first_unstable_offset() is None
    # the next transaction of the same epoch: nothing lets it in unverified
    refused(state, 2)
    state.mark_verified(PID, 0)
    batch(state, 3, 2)
    assert state.first_unstable_offset() == 3


def test_a_marker_drops_an_unspent_verification(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.mark_verified(PID, 0)  # added, but the transaction ended before any batch here
    marker(state, 0, commit=False)
    refused(state, 0)


def test_a_marker_between_ask_and_answer_voids_the_answer(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    guard = state.begin_verification(PID, 0)
    marker(state, 0, commit=False)  # the coordinator ended the transaction meanwhile
    assert not state.complete_verification(PID, guard)
    refused(state, 0)
    guard = state.begin_verification(PID, 0)
    assert state.complete_verification(PID, guard)
    batch(state, 1, 0)


def test_a_verification_is_of_one_epoch(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.mark_verified(PID, 0)
    refused(state, 0, epoch=1)
    guard = state.begin_verification(PID, 1)  # replaces epoch 0's
    assert not state.is_verified(PID, 0)
    assert state.complete_verification(PID, guard)
    batch(state, 0, 0, epoch=1)


def test_clearing_drops_every_verification(tmp_path: Path) -> None:
    state = ProducerStateManager(tmp_path)
    state.mark_verified(PID, 0)
    guard = state.begin_verification(PID + 1, 0)
    state.clear_verifications()
    assert not state.is_verified(PID, 0)
    assert not state.complete_verification(PID + 1, guard)
