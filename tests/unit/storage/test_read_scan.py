"""Log.read (one scan per segment: Segment.scan_for_read) against a model of what it must return:
whole batches of one segment from the one holding the offset, none at or past max_offset,
within max_bytes unless the first alone is larger and min_one_batch."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.storage.log import Log
from tests.unit.storage.support import append_values, small_config


def _model(log: Log, offset: int, max_bytes: int, max_offset: int,
           min_one: bool) -> tuple[int, int, int] | None:
    """(position, size, first batch offset) of the read, from the segments' batch lists."""
    max_offset = min(max_offset, log.log_end_offset)
    if offset >= max_offset:
        return None
    for seg in log.segments:
        if seg.next_offset <= offset:
            continue
        batches = [(pos, h) for pos, h in seg.headers(0)]
        first = next((i for i, (_, h) in enumerate(batches) if h[0] + h[6] >= offset), None)
        if first is None:
            continue
        start, h0 = batches[first]
        if h0[0] + h0[6] >= max_offset:
            return None
        end = start
        for pos, h in batches[first:]:
            nxt = pos + h[1] + 12
            if h[0] + h[6] >= max_offset or nxt - start > max_bytes:
                break
            end = nxt
        if end == start:
            if not min_one:
                return None
            end = start + h0[1] + 12
        return start, end - start, h0[0]
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.tuples(st.integers(1, 4), st.sampled_from([10, 300, 3000, 12000])),
                   min_size=1, max_size=40),
    queries=st.lists(st.tuples(st.integers(0, 200), st.integers(-1, 40000),
                               st.integers(0, 200), st.booleans()), min_size=1, max_size=30),
)
def test_read_matches_the_model(sizes: list[tuple[int, int]],
                                queries: list[tuple[int, int, int, bool]]) -> None:
    # batches of a few bytes to more than the first scan block (8 KiB), in several segments,
    # with an index entry every 128 bytes: reads that end inside the first block, past it,
    # and batches that start past it
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / "t-0", small_config(segment_bytes=40_000))
        try:
            for count, size in sizes:
                append_values(log, [bytes(size // count)] * count)
            leo = log.log_end_offset
            for offset, max_bytes, max_offset, min_one in queries:
                offset %= leo + 1
                result = log.read(offset, max_bytes, max_offset, min_one)
                want = _model(log, offset, max_bytes, max_offset, min_one)
                got = (None if result.region is None else
                       (result.region.position, result.region.size, result.first_batch_offset))
                assert got == want, (offset, max_bytes, max_offset, min_one)
        finally:
            log.close()
