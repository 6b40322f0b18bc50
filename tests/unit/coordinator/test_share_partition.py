"""The share-partition state machine (KIP-932): acquisition, acknowledgement, lock timeouts,
the delivery-count limit, the in-flight window and its start offset; and a hypothesis
state machine that checks it against a plain per-offset model."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from odradek.coordinator.share.partition import (
    AckBatch,
    AckError,
    AckType,
    AcquiredRange,
    RecordState,
    SharePartition,
    StateBatch,
)
from odradek.protocol.errors import ErrorCode as E

A, R, J, G, N = AckType.ACCEPT, AckType.RELEASE, AckType.REJECT, AckType.GAP, AckType.RENEW


def sp(start: int = 0, **kw: int) -> SharePartition:
    return SharePartition(start, **{"lock_duration_ms": 1000, **kw})


def ack(first: int, last: int, *types: int) -> AckBatch:
    return AckBatch(first, last, tuple(types))


def test_acquire_whole_batches_and_window():
    p = sp(10)
    got = p.acquire("m1", [(10, 14), (15, 19)], max_records=500, now=0)
    assert got == [AcquiredRange(10, 19, 1)]
    assert (p.start_offset, p.end_offset, p.next_fetch_offset()) == (10, 19, 20)
    assert p.state_of(12) is RecordState.ACQUIRED and p.state_of(20) is None


def test_max_records_stops_at_a_batch_boundary():
    p = sp()
    # a new batch is taken whole even past max_records, as Kafka's batch-optimized acquire
    assert p.acquire("m", [(0, 4), (5, 9)], max_records=3, now=0) == [AcquiredRange(0, 4, 1)]
    assert p.next_fetch_offset() == 5


def test_record_limit_mode_cuts_batches():
    p = sp()
    got = p.acquire("m", [(0, 4), (5, 9)], max_records=3, now=0, record_limit=True)
    assert got == [AcquiredRange(0, 2, 1)] and p.next_fetch_offset() == 3


def test_accept_moves_the_start_offset_and_forgets():
    p = sp()
    p.acquire("m", [(0, 9)], 100, 0)
    p.acknowledge("m", [ack(0, 4, A)], 1)
    assert p.start_offset == 5 and p.end_offset == 9 and 3 not in p.records
    assert p.state_of(3) is RecordState.ARCHIVED  # below the SPSO: done


def test_release_redelivers_with_a_higher_count():
    p = sp()
    p.acquire("m1", [(0, 4)], 100, 0)
    p.acknowledge("m1", [ack(0, 4, A, R, A, A, A)], 1)
    assert p.start_offset == 1 and p.next_fetch_offset() == 1
    got = p.acquire("m2", [(0, 9)], 100, 2)
    assert got == [AcquiredRange(1, 1, 2), AcquiredRange(5, 9, 1)]
    assert p.records[1].member_id == "m2"


def test_reject_and_gap_archive():
    p = sp()
    p.acquire("m", [(0, 3)], 100, 0)
    p.acknowledge("m", [ack(0, 3, J, G, A, J)], 1)
    assert p.start_offset == 4 and not p.records


def test_delivery_count_limit_archives_on_release_and_on_timeout():
    p = sp(delivery_count_limit=2)
    p.acquire("m", [(0, 1)], 100, 0)
    p.acknowledge("m", [ack(0, 1, R)], 1)
    p.acquire("m", [(0, 1)], 100, 2)
    assert p.records[0].delivery_count == 2
    p.acknowledge("m", [ack(0, 0, R)], 3)  # second delivery released: at the limit
    assert p.start_offset == 1
    assert p.expire_locks(2 + 1000) == 1  # offset 1's lock runs out, also at the limit
    assert p.start_offset == 2 and p.next_fetch_offset() == 2


def test_lock_timeout_releases_below_the_limit():
    p = sp()
    p.acquire("m", [(0, 2)], 100, 0)
    assert p.next_lock_deadline() == 1000
    assert p.expire_locks(999) == 0
    assert p.expire_locks(1000) == 3
    assert p.state_of(0) is RecordState.AVAILABLE and p.next_lock_deadline() is None
    # a late acknowledgement of the timed-out records is refused, nothing changes
    with pytest.raises(AckError) as e:
        p.acknowledge("m", [ack(0, 2, A)], 1001)
    assert e.value.code == E.invalid_record_state
    assert p.state_of(0) is RecordState.AVAILABLE


def test_renew_extends_the_lock():
    p = sp()
    p.acquire("m", [(0, 0)], 100, 0)
    p.acknowledge("m", [ack(0, 0, N)], 900)
    assert p.expire_locks(1000) == 0 and p.state_of(0) is RecordState.ACQUIRED
    assert p.expire_locks(1900) == 1
    p.acquire("m", [(0, 0)], 100, 2000)
    with pytest.raises(AckError) as e:
        p.acknowledge("m", [ack(0, 0, N)], 2001, renew_allowed=False)
    assert e.value.code == E.invalid_request


@pytest.mark.parametrize("batch, code", [
    (ack(0, 1, A), E.invalid_record_state),          # offset 1 belongs to m2
    (ack(5, 9, A), E.invalid_request),                # past anything acquired
    (ack(3, 2, A), E.invalid_request),                # backwards range
    (ack(0, 0, 7), E.invalid_request),                # unknown type
    (ack(0, 1, A, A, A), E.invalid_request),          # types do not fit the range
])
def test_bad_acknowledgements_change_nothing(batch, code):
    p = sp()
    p.acquire("m1", [(0, 0)], 100, 0)
    p.acquire("m2", [(1, 2)], 100, 0)
    before = {o: (r.state, r.member_id) for o, r in p.records.items()}
    with pytest.raises(AckError) as e:
        # a good batch first: the whole request is refused, the good part too
        p.acknowledge("m1", [ack(0, 0, A), batch] if batch.first_offset else [batch], 1)
    assert e.value.code == code
    assert {o: (r.state, r.member_id) for o, r in p.records.items()} == before
    assert p.start_offset == 0


def test_acknowledging_twice_is_invalid_record_state():
    p = sp()
    p.acquire("m", [(0, 5)], 100, 0)
    p.acknowledge("m", [ack(2, 3, A)], 1)
    with pytest.raises(AckError) as e:
        p.acknowledge("m", [ack(2, 2, A)], 1)
    assert e.value.code == E.invalid_record_state
    with pytest.raises(AckError) as e:  # wholly below the SPSO after the first is done
        p.acknowledge("m", [ack(0, 1, A)], 1)
        p.acknowledge("m", [ack(0, 1, A)], 1)
    assert e.value.code == E.invalid_record_state


def test_max_record_locks_caps_the_window():
    p = sp(max_record_locks=4)
    assert p.acquire("m", [(0, 9)], 100, 0) == [AcquiredRange(0, 3, 1)]
    assert not p.can_acquire()
    assert p.acquire("m", [(4, 9)], 100, 0) == []
    p.acknowledge("m", [ack(0, 1, A)], 1)
    assert p.can_acquire()
    assert p.acquire("m", [(4, 9)], 100, 0) == [AcquiredRange(4, 5, 1)]
    # a released record can always be taken again, even with the window full
    p.acknowledge("m", [ack(2, 2, R)], 1)
    assert p.can_acquire() and p.next_fetch_offset() == 2


def test_release_member_and_offsets_skipped_by_the_log():
    p = sp()
    p.acquire("m1", [(0, 1), (5, 6)], 100, 0)  # 2-4 are not in the log (compacted away)
    assert p.state_of(3) is RecordState.ARCHIVED
    assert p.release_member("m1") == 4 and p.release_member("m1") == 0
    assert p.next_fetch_offset() == 0


def test_batches_not_to_deliver_are_archived():
    p = sp()
    # read_committed: 2-3 is an aborted transaction's batch, 4 its abort marker
    got = p.acquire("m", [(0, 1), (2, 3, False), (4, 4, False), (5, 6)], 100, 0)
    assert got == [AcquiredRange(0, 1, 1), AcquiredRange(5, 6, 1)]
    assert [p.state_of(o) for o in (2, 3, 4)] == [RecordState.ARCHIVED] * 3
    p.acknowledge("m", [ack(0, 1, A)], 1)
    assert p.start_offset == 5
    # the window's cap holds for archived records too
    q = sp(max_record_locks=3)
    assert q.acquire("m", [(0, 9, False)], 100, 0) == []
    assert q.start_offset == 3 and q.end_offset == 2


def test_move_start_drops_records_below_the_log_start():
    p = sp()
    p.acquire("m", [(0, 5)], 100, 0)
    p.move_start(3)
    assert p.start_offset == 3 and 2 not in p.records and p.state_of(3) is RecordState.ACQUIRED
    p.move_start(10)
    assert (p.start_offset, p.end_offset, p.records) == (10, 9, {})


def test_snapshot_and_restore_keep_counts_and_drop_locks():
    p = sp()
    p.acquire("m", [(0, 9)], 100, 0)
    p.acknowledge("m", [ack(1, 3, A), ack(4, 4, R), ack(6, 6, J)], 1)
    start, batches = p.snapshot()
    assert start == 0
    assert batches[0] == StateBatch(0, 0, RecordState.AVAILABLE, 1)
    q = sp()
    q.restore(start, batches)
    assert q.next_fetch_offset() == 0 and q.end_offset == 9
    assert [q.state_of(o) for o in (0, 1, 4, 6, 9)] == [
        RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.AVAILABLE,
        RecordState.ARCHIVED, RecordState.AVAILABLE]
    assert q.snapshot() == (start, batches)


# ---------------------------------------------------------------- model-based


class Model:
    """Per offset: (state, count, member, deadline); no window, no pruning."""

    def __init__(self, limit: int, locks: int) -> None:
        self.limit, self.locks = limit, locks
        self.rec: dict[int, list] = {}
        self.log_start = 0  # retention moved the log's start here

    def start(self) -> int:
        o = self.log_start
        while o in self.rec and self.rec[o][0] in ("ACK", "ARC"):
            o += 1
        return o


class SharePartitionMachine(RuleBasedStateMachine):
    MEMBERS = ("a", "b")

    def __init__(self) -> None:
        super().__init__()
        self.p = SharePartition(0, delivery_count_limit=3, max_record_locks=8,
                                lock_duration_ms=10)
        self.m = Model(3, 8)
        self.now = 0
        self.log_end = 0

    @rule(n=st.integers(1, 6))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(member=st.sampled_from(MEMBERS), max_records=st.integers(1, 10))
    def acquire(self, member: str, max_records: int) -> None:
        lo = self.p.next_fetch_offset()
        fetched = [(o, o) for o in range(lo, self.log_end)]  # one-record batches
        got = self.p.acquire(member, fetched, max_records, self.now)
        taken = [o for r in got for o in range(r.first_offset, r.last_offset + 1)]
        # the model: available records first, then new ones while the window has room
        expect = []
        for o in range(lo, self.log_end):
            if len(expect) >= max_records:
                break
            rec = self.m.rec.get(o)
            if (rec is not None and rec[0] == "AV") or (rec is None and o - self.m.start() < self.m.locks):
                expect.append(o)
        assert taken == expect
        for o in taken:
            rec = self.m.rec.setdefault(o, ["AV", 0, None, None])
            rec[:] = ["AQ", rec[1] + 1, member, self.now + 10]
            assert {r.delivery_count for r in got if r.first_offset <= o <= r.last_offset} \
                == {rec[1]}

    @rule(member=st.sampled_from(MEMBERS), first=st.integers(0, 30), width=st.integers(0, 3),
          kind=st.sampled_from([A, R, J, G, N]))
    def acknowledge(self, member: str, first: int, width: int, kind: AckType) -> None:
        last = first + width
        start = self.m.start()
        end = self.p.end_offset
        ok = last >= start and last <= end and all(
            self.m.rec[o][0] == "AQ" and self.m.rec[o][2] == member
            for o in range(max(first, start), last + 1))
        try:
            self.p.acknowledge(member, [AckBatch(first, last, (int(kind),))], self.now)
        except AckError as e:
            assert not ok
            assert e.code == (E.invalid_request if last > end else E.invalid_record_state)
            return
        assert ok
        for o in range(max(first, start), last + 1):
            rec = self.m.rec[o]
            if kind is N:
                rec[3] = self.now + 10
            elif kind is A:
                rec[:] = ["ACK", rec[1], None, None]
            elif kind is R:
                rec[:] = ["ARC" if rec[1] >= 3 else "AV", rec[1], None, None]
            else:
                rec[:] = ["ARC", rec[1], None, None]

    @rule(dt=st.integers(1, 12))
    def tick(self, dt: int) -> None:
        self.now += dt
        self.p.expire_locks(self.now)
        for rec in self.m.rec.values():
            if rec[0] == "AQ" and rec[3] <= self.now:
                rec[:] = ["ARC" if rec[1] >= 3 else "AV", rec[1], None, None]

    @rule(member=st.sampled_from(MEMBERS))
    def leave(self, member: str) -> None:
        self.p.release_member(member)
        for rec in self.m.rec.values():
            if rec[0] == "AQ" and rec[2] == member:
                rec[:] = ["ARC" if rec[1] >= 3 else "AV", rec[1], None, None]

    @rule(n=st.integers(1, 4))
    def retention(self, n: int) -> None:
        """The log start moves (retention, DeleteRecords): records below it are gone."""
        self.m.log_start = min(self.log_end, self.m.log_start + n)
        self.p.move_start(self.m.log_start)

    @rule()
    def persist_and_reload(self) -> None:
        start, batches = self.p.snapshot()
        q = SharePartition(0, delivery_count_limit=3, max_record_locks=8, lock_duration_ms=10)
        q.restore(start, batches)
        self.p = q
        for rec in self.m.rec.values():  # a reload drops every lock
            if rec[0] == "AQ":
                rec[:] = ["ARC" if rec[1] >= 3 else "AV", rec[1], None, None]

    @invariant()
    def agrees(self) -> None:
        names = {"AV": RecordState.AVAILABLE, "AQ": RecordState.ACQUIRED,
                 "ACK": RecordState.ACKNOWLEDGED, "ARC": RecordState.ARCHIVED}
        assert self.p.start_offset == self.m.start()
        assert self.p.in_flight_count() <= 8
        locks = [r[3] for o, r in self.m.rec.items() if r[0] == "AQ" and o >= self.m.log_start]
        assert self.p.next_lock_deadline() == (min(locks) if locks else None)
        for o, rec in self.m.rec.items():
            if o < self.m.log_start:
                assert o not in self.p.records
                continue
            got = self.p.state_of(o)
            if o < self.p.start_offset:
                assert rec[0] in ("ACK", "ARC")
            else:
                assert got is names[rec[0]], (o, got, rec)
                assert self.p.records[o].delivery_count == rec[1]
                assert rec[1] <= 3


SharePartitionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                                   deadline=None)
test_share_partition_against_model = SharePartitionMachine.TestCase
