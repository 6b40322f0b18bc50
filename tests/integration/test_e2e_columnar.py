"""`odradek bench e2e --client columnar` against a real node: it prints EndToEndLatency's
summary like the confluent-kafka path, and every record sent after the warm-up is measured
(counts from the node's own watermarks, never timings). The stamping is checked without a
node: a record's stamp is its scheduled send time, so the wait for its batch is measured."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from odradek.client.batch_builder import build_columnar_batch
from odradek.perf.confluent import latency_of, make_payload
from odradek.perf.e2e_columnar import (
    StampedBatches,
    record_latencies_ms,
    scheduled_stamps,
    stamped_rows,
    warmup_records,
    whole_batches,
)
from tests.integration.cli_support import ok
from tests.integration.test_cli_bench import E2E, stored_records
from tests.support.broker import BrokerProcess


def test_e2e_columnar_measures_every_record_after_warm_up(broker: BrokerProcess) -> None:
    rate, partitions = 2000, 6
    out = ok("bench", "e2e", "--client", "columnar", "-t", "latency-columnar", "--rate",
             str(rate), "--seconds", "1", "--partitions", str(partitions),
             bootstrap=broker.bootstrap)
    m = E2E.search(out)
    assert m, out
    assert out.splitlines()[0].startswith("# client: columnar"), out
    measured = int(m.group(1))
    p50, p99, p999 = (float(m.group(i)) for i in (2, 3, 4))
    assert 0 <= p50 <= p99 <= p999
    parts, stored = stored_records(broker.bootstrap, "latency-columnar")
    assert parts == partitions
    # Every record the node stored was seen, and every one past the warm-up measured.
    assert f"{stored} records sent" in out and f"{stored} seen by the consumer" in out, out
    assert measured == stored - warmup_records(rate, 0.5) > 0


def test_e2e_columnar_rejects_unknown_client(broker: BrokerProcess) -> None:
    from tests.integration.cli_support import odradek

    res = odradek("bench", "e2e", "--client", "kcat", "--seconds", "0.1",
                  bootstrap=broker.bootstrap)
    assert res.returncode != 0
    assert "--client must be one of" in res.stdout + res.stderr


def test_stamps_are_scheduled_send_times() -> None:
    # Record i is due at start + i/rate whatever batch it goes out in: a batch built later
    # than its first record was due does not move the stamp (the wait counts).
    start, rate = 1_000_000_000, 100_000.0
    first = scheduled_stamps(start, rate, 0, 10)
    assert first.tolist() == [start + i * 10_000 for i in range(10)]
    later = scheduled_stamps(start, rate, 10, 5)
    assert later.tolist() == [start + i * 10_000 for i in range(10, 15)]
    assert scheduled_stamps(start, 3.0, 1, 2).tolist() == [start + 333_333_333,
                                                         start + 666_666_667]


def test_warm_up_is_the_records_scheduled_before_it_ends() -> None:
    assert warmup_records(2000, 0.5) == 1000
    assert warmup_records(3, 0.5) == 2  # records 0 and 1 at 0 and 1/3 s
    assert warmup_records(1000, 0) == 0


@given(stamps=st.lists(st.integers(0, 2**62), min_size=1, max_size=50),
       size=st.integers(8, 40), now=st.integers(0, 2**62), data=st.data())
def test_latencies_read_the_perf_encoding(stamps: list[int], size: int, now: int,
                                          data: st.DataObject) -> None:
    """record_latencies_ms over rows laid out anywhere in a buffer agrees with
    perf.latency_of record by record (warm-up flag, values of 8 bytes without one)."""
    warm = np.array(data.draw(st.lists(st.booleans(), min_size=len(stamps),
                                       max_size=len(stamps))))
    payload = make_payload(max(size, 9))[:size] if size >= 9 else bytes(size)
    if size >= 9:
        rows = stamped_rows(payload, np.array(stamps, np.int64), warm)
    else:
        rows = np.empty((len(stamps), size), np.uint8)
        rows[:] = np.array(stamps, ">i8").view(np.uint8).reshape(-1, 8)[:, :size]
    gap = data.draw(st.integers(0, 5))
    buf = bytearray()
    pos, lens = [], []
    for row in rows:
        buf += bytes(gap)
        pos.append(len(buf))
        lens.append(size)
        buf += row.tobytes()
    # a null value in the mix: not counted, not measured
    pos.append(len(buf))
    lens.append(-1)
    count, got = record_latencies_ms(bytes(buf), np.array(pos, np.int64),
                                     np.array(lens, np.int64), now)
    expected = [latency_of(row.tobytes(), now) for row in rows]
    assert count == len(stamps)
    assert got.tolist() == [x for x in expected if x is not None]


@given(stamps=st.lists(st.integers(0, 2**62), min_size=1, max_size=300),
       size=st.sampled_from([9, 10, 100, 127, 128, 1000]), base=st.integers(0, 2**40),
       data=st.data())
def test_stamped_batches_are_the_batches_the_builder_makes(stamps: list[int], size: int,
                                                           base: int,
                                                           data: st.DataObject) -> None:
    """A stamped copy of the cached batch is byte for byte the batch build_columnar_batch
    makes from the stamped rows (CRC and timestamps included)."""
    warm = np.array(data.draw(st.lists(st.booleans(), min_size=len(stamps),
                                       max_size=len(stamps))))
    payload = make_payload(size)
    arr = np.array(stamps, np.int64)
    batches = StampedBatches(payload)
    got = batches.batch(arr, warm, base)
    assert got == build_columnar_batch(stamped_rows(payload, arr, warm), base_timestamp=base)
    # the template is reused: a second batch of the same count is stamped afresh
    assert batches.batch(arr[::-1].copy(), warm[::-1].copy(), base) == build_columnar_batch(
        stamped_rows(payload, arr[::-1], warm[::-1]), base_timestamp=base)


@given(counts=st.lists(st.integers(1, 40), min_size=0, max_size=6), cut=st.integers(0, 200),
       first=st.integers(0, 2**40))
def test_whole_batches_stop_before_a_cut_batch(counts: list[int], cut: int, first: int) -> None:
    """Batches back to back from `first` (as a fetch returns them) minus a cut tail: the whole
    ones are kept, and the next offset is the one after the last whole batch."""
    import struct

    data = bytearray()
    offset = first
    ends = []
    for n in counts:
        b = build_columnar_batch(np.zeros((n, 12), np.uint8), base_timestamp=0)
        struct.pack_into(">q", b, 0, offset)
        offset += n
        data += b
        ends.append((len(data), offset))
    cut_data = bytes(data[:max(0, len(data) - cut)])
    records, next_offset = whole_batches(cut_data)
    kept = [(size, end) for size, end in ends if size <= len(cut_data)]
    assert len(records) == (kept[-1][0] if kept else 0)
    assert next_offset == (kept[-1][1] if kept else -1)
    assert records == cut_data[:len(records)]
