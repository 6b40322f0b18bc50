"""Which fetched batches a share fetch may deliver (broker/handlers/share.py): transaction
markers never, an aborted transaction's batches not under read_committed."""

from __future__ import annotations

from typing import NamedTuple

from odradek.broker.handlers.share import _deliverable


class H(NamedTuple):
    base_offset: int
    last_offset_delta: int
    attributes: int
    producer_id: int


TXN, CONTROL = 0x10, 0x30  # a marker batch is transactional and control


def test_aborted_batches_and_markers():
    headers = [(H(0, 1, 0, -1), None),        # plain
               (H(2, 1, TXN, 7), None),       # pid 7, aborted below
               (H(4, 0, TXN, 8), None),       # pid 8, committed
               (H(5, 0, CONTROL, 7), None),   # pid 7's abort marker
               (H(6, 0, TXN, 7), None),       # pid 7 again, a new (committed) transaction
               (H(7, 0, CONTROL, 8), None)]   # pid 8's commit marker
    assert _deliverable(headers, [(7, 2)]) == [True, False, True, False, True, False]
    # read_uncommitted: no aborted list, only the markers are held back
    assert _deliverable(headers, []) == [True, True, True, False, True, False]


def test_a_read_starting_inside_an_aborted_transaction():
    headers = [(H(10, 4, TXN, 3), None), (H(15, 0, CONTROL, 3), None)]
    assert _deliverable(headers, [(3, 8)]) == [False, False]
