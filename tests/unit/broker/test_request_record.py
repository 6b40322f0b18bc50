"""Issue 18: the C recording of the request metrics (broker/metrics/_record.c) against its
pure-Python reference, on made-up sequences of reads, answers and later answers; its
inputs fuzzed; its clock against time.perf_counter."""

from __future__ import annotations

import gc
import math
import subprocess
import sys
import time
import weakref
from bisect import bisect_left
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.broker.metrics._record import Table, Timer
from odradek.broker.metrics.requests import (
    BUCKETS_MS,
    BUCKETS_S,
    LOCAL,
    MAX_KEY,
    NB,
    QUEUE,
    ROW,
    SUM_QUEUE,
    SUM_TOTAL,
    SUM_WAIT,
    SUMS,
    TOTAL,
    RequestStats,
)

_FIRST = BUCKETS_S[0]
_API_VERSIONS = 18
VERSIONS = 64


class Reference:
    """What the server recorded before the C extension, in Python (RequestStats.record of
    the session-12 code): the lists the collector read and the same float operations."""

    def __init__(self, slow_s: float) -> None:
        self.versions = [[0] * (1 << 16 if key == _API_VERSIONS else VERSIONS)
                         for key in range(MAX_KEY)]
        self.rows: list[list[Any]] = [[0] * SUMS + [0.0] * 3 for _ in range(MAX_KEY)]
        self.slow_s = slow_s
        self.rare = min(_FIRST, slow_s)
        self.slow: list[tuple[Any, ...]] = []

    def count(self, key: int, version: int) -> None:
        if not 0 <= key < MAX_KEY:
            return
        row = self.versions[key]
        row[version if -len(row) <= version < len(row) else len(row) - 1] += 1

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        key = header[0]
        if not 0 <= key < MAX_KEY:
            return
        self.count(key, header[1])
        row = self.rows[key]
        row[SUM_TOTAL] += done - received
        row[SUM_QUEUE] += started - received
        if done != handled:
            row[SUM_WAIT] += done - handled
        if done - received > self.rare:
            queue, local, total = started - received, handled - started, done - received
            if queue > _FIRST:
                row[QUEUE + bisect_left(BUCKETS_S, queue)] += 1
            if local > _FIRST:
                row[LOCAL + bisect_left(BUCKETS_S, local)] += 1
            if total > _FIRST:
                row[TOTAL + bisect_left(BUCKETS_S, total)] += 1
            if total > self.slow_s:
                self.slow.append((header, queue, local, total))

    def versions_of(self, key: int) -> dict[int, int]:
        return {(v if key != _API_VERSIONS or v < 1 << 15 else v - (1 << 16)): n
                for v, n in enumerate(self.versions[key]) if n}


def same(a: Any, b: Any) -> bool:
    """Equal, float for float (a NaN equals a NaN here)."""
    return repr(a) == repr(b)


def tables_agree(table: Any, ref: Reference) -> None:
    for key in range(MAX_KEY):
        assert table.versions(key) == ref.versions_of(key), key
        row = table.row(key)
        assert len(row) == ROW
        assert row[:SUMS] == ref.rows[key][:SUMS], key
        assert same(row[SUMS:], ref.rows[key][SUMS:]), (key, row[SUMS:], ref.rows[key][SUMS:])


# a step of time: exactly on a bucket's bound, a little, anything up to past the last bound
_STEP = st.one_of(st.sampled_from((0.0, *BUCKETS_S)), st.floats(0, 0.003),
                  st.floats(0, 40.0))
_HEADER = st.tuples(st.sampled_from((0, 1, 3, 18, 127)),
                    st.sampled_from((0, 3, 9, 63, 64, 500, -1, -64, -65, 32767, -32768)))
# a connection's events: a read, an answer ready as its handler returns, or a handler that
# returns an awaitable answered a step later
_EVENT = st.one_of(
    st.tuples(st.just("read"), _STEP),
    st.tuples(st.just("answer"), _STEP, _HEADER),
    st.tuples(st.just("later"), _STEP, _HEADER, _STEP),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_EVENT, max_size=60), st.sampled_from((-1, 0, 1, 3, 100, 30_000)),
       st.floats(0, 1e6))
def test_the_c_recording_gives_the_references_rows(events: list[tuple[Any, ...]],
                                                   slow_ms: int, start: float) -> None:
    """A Timer driven with explicit times (as the server drives it with the clock's) and
    Table.record for later answers count exactly what the reference counts for the same
    times, as the server handed them over: sums float for float, buckets, versions, slow
    calls."""
    slow_s = slow_ms / 1000 if slow_ms >= 0 else math.inf
    ref = Reference(slow_s)
    slow: list[tuple[Any, ...]] = []
    table = Table(slow_s, lambda *a: slow.append(a))
    timer = Timer(table)
    now = start
    received = last_done = now
    timer.mark_read(now)
    for event in events:
        now += event[1]
        if event[0] == "read":
            timer.mark_read(now)
            received = last_done = now
        elif event[0] == "answer":
            timer.record(event[2], now)
            ref.record(event[2], received, last_done, now, now)
            last_done = now
        else:
            got = timer.handled(now)
            assert got == (received, last_done, now)
            done = now + event[3]
            table.record(event[2], *got, done)
            ref.record(event[2], received, last_done, now, done)
            last_done = now
        assert (timer.received, timer.last_done) == (received, last_done)
    tables_agree(table, ref)
    assert same(slow, ref.slow)


_ANY_INT = st.one_of(st.integers(-200, 200), st.integers(-(1 << 70), 1 << 70),
                     st.sampled_from((65535, 65536, -65536, -65537, 1 << 63, -(1 << 63))))
_ANY_TIME = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                      st.sampled_from((0.0, -0.0, *BUCKETS_S)))


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_ANY_INT, _ANY_INT, _ANY_TIME, _ANY_TIME, _ANY_TIME, _ANY_TIME),
                max_size=20),
       st.lists(st.tuples(_ANY_INT, _ANY_INT), max_size=10))
def test_any_key_version_or_time_counts_as_the_reference(
        requests: list[tuple[Any, ...]], counted: list[tuple[int, int]]) -> None:
    """Bad api keys (outside 0..127, past a C long) are not counted, versions past a key's
    row count at its last (negative ones index from the end, as the lists did), and NaN,
    infinite or backward times are summed and bucketed as the reference does them."""
    ref = Reference(0.05)
    slow: list[tuple[Any, ...]] = []
    table = Table(0.05, lambda *a: slow.append(a))
    for key, version, *times in requests:
        table.record((key, version, 7, "c"), *times)
        ref.record((key, version, 7, "c"), *times)
    for key, version in counted:
        table.count(key, version)
        ref.count(key, version)
    tables_agree(table, ref)
    assert same(slow, ref.slow)


def test_wrong_arguments_raise_instead_of_crashing() -> None:
    table = Table(math.inf, lambda *a: None)
    timer = Timer(table)
    for header in ((), (1,), [0, 1], None, ("0", 1), (0, 1.5), (0, None)):
        with pytest.raises(TypeError):
            table.record(header, 0.0, 0.0, 0.0, 0.0)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            timer.record(header, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        table.record((0, 9), 0.0, "0", 0.0, 0.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        table.record((0, 9), 0.0, 0.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        timer.mark_read(1.0, 2.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Timer(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Table(1.0, None)  # type: ignore[arg-type]
    for key in (-1, MAX_KEY, 1 << 80):
        with pytest.raises(IndexError):
            table.row(key)
        with pytest.raises(IndexError):
            table.versions(key)
    assert all(not table.versions(k) for k in range(MAX_KEY))


def test_a_failing_slow_log_raises_out_of_record() -> None:
    def slow(*args: Any) -> None:
        raise RuntimeError("log down")

    table = Table(0.001, slow)
    with pytest.raises(RuntimeError, match="log down"):
        table.record((0, 9), 0.0, 0.0, 0.5, 0.5)
    assert table.versions(0) == {9: 1}  # counted before the log was called


def test_the_timers_clock_is_perf_counters() -> None:
    """The Timer reads time.perf_counter's clock (a later answer's end is read in Python and
    subtracted from a read's time taken in C)."""
    timer = Timer(RequestStats().table)
    for _ in range(100):
        before = time.perf_counter()
        timer.mark_read()
        after = time.perf_counter()
        assert before <= timer.received <= after
        timer.record((3, 12))
        assert after <= timer.last_done <= time.perf_counter()
        _, started, handled = timer.handled()
        assert started <= handled <= time.perf_counter()


def test_request_stats_reads_its_table_as_the_collector_wants() -> None:
    stats = RequestStats(slow_ms=-1)
    stats.record((0, 9), 1.0, 1.0, 1.003, 1.003)
    stats.record((0, 9), 1.0, 1.003, 1.004, 1.5)
    stats.record((18, -1), 2.0, 2.0, 2.0, 2.0)
    stats.count(0, 900)
    assert stats.apis() == [(0, {9: 2, 63: 1}), (18, {-1: 1})]
    assert stats.buckets("total", 0) == [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    assert stats.buckets("queue", 0)[:6] == [2, 0, 0, 0, 0, 1]
    assert len(stats.buckets("local", 0)) == NB == len(BUCKETS_MS) + 1
    assert stats.seconds("total", 0) == (1.003 - 1.0) + (1.5 - 1.0)
    assert stats.seconds("queue", 0) == (1.0 - 1.0) + (1.003 - 1.0)
    assert stats.seconds("local", 0) == pytest.approx(0.003 + 0.001)


def test_request_stats_and_its_table_are_collected() -> None:
    """The table holds its RequestStats' slow(), which holds the stats: a cycle the
    garbage collector must see through (the table takes part in it)."""
    stats = RequestStats(slow_ms=10)
    gone = weakref.ref(stats)
    del stats
    gc.collect()
    assert gone() is None


def test_without_the_extension_the_node_does_not_import() -> None:
    """No Python fallback: a missing extension stops the import, saying what to do."""
    code = ("import sys; sys.modules['odradek.broker.metrics._record'] = None\n"
            "import odradek.broker.server")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "is not built: run `make setup`" in out.stderr
