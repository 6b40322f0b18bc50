"""How the multi-process perf tools split their work: every record in exactly one share; and
the columnar consumer decoding several partitions' fetches in one pass counts what each
partition's own fetch holds from its start, record by record."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.client.columnar import columns, select
from odradek.perf.columnar_consumer import merged
from odradek.perf.parallel import consumer_quotas, shares
from odradek.protocol.records import Compression, Record, build_batch


@given(st.integers(0, 10**9), st.integers(1, 64))
def test_shares_add_up_and_differ_by_at_most_one(total: int, n: int) -> None:
    parts = shares(total, n)
    assert len(parts) == n
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1


@given(st.lists(st.integers(0, 10**7), min_size=1, max_size=16), st.integers(1, 2 * 10**8))
def test_consumer_quotas_never_exceed_what_each_has(available: list[int], wanted: int) -> None:
    quotas = consumer_quotas(available, wanted)
    assert len(quotas) == len(available)
    assert all(0 <= q <= a for q, a in zip(quotas, available, strict=True))
    assert sum(quotas) == min(wanted, sum(available))


blobs = st.one_of(st.none(), st.binary(max_size=30))
batch = st.tuples(st.lists(st.tuples(blobs, blobs), min_size=1, max_size=30),
                  st.sampled_from([Compression.NONE, Compression.GZIP, Compression.LZ4]))
partition = st.tuples(st.lists(batch, min_size=1, max_size=5), st.integers(0, 200))


def fetched(spec: list, base: int) -> tuple[bytes, list[Record]]:
    out, recs, offset = [], [], base
    for rows, codec in spec:
        batch_recs = [Record(offset + i, 1_000 + i, k, v) for i, (k, v) in enumerate(rows)]
        out.append(build_batch(batch_recs, base_offset=offset, compression=codec))
        recs += batch_recs
        offset += len(rows)
    return b"".join(out), recs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(partition, min_size=1, max_size=4))
def test_merged_decode_counts_each_partition_from_its_start(parts: list) -> None:
    sels, expected = [], []
    for n, (spec, skip) in enumerate(parts):
        raw, recs = fetched(spec, base=10 * n)
        # A start inside a batch: the decoder keeps the whole batch, the tool must not count
        # the records before the start.
        start = recs[min(skip, len(recs) - 1)].offset
        sel = select(raw, start=start, end=1 << 40)
        if sel.segments:
            sels.append(sel)
        expected += [r for r in recs if r.offset >= start]
    one, lo, hi = merged(sels)
    cols = columns(one)
    assert cols is not None
    keep = (cols.offsets >= lo) & (cols.offsets < hi)
    assert cols.offsets[keep].tolist() == [r.offset for r in expected]
    assert cols.key_len[keep].tolist() == [-1 if r.key is None else len(r.key) for r in expected]
    assert cols.value_len[keep].tolist() == [-1 if r.value is None else len(r.value)
                                             for r in expected]
