from __future__ import annotations

from pathlib import Path

from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.storage.config import LogConfig
from odradek.storage.log import Log


def make_batch(
    values: list[bytes],
    timestamps: list[int] | None = None,
    compression: int = 0,
    key: bytes | None = b"k",
) -> tuple[memoryview, BatchHeader]:
    """A producer-style batch (base offset 0) and its parsed header."""
    ts = timestamps if timestamps is not None else [1_000 + i for i in range(len(values))]
    records = [Record(-1, t, key, v, [("h", b"x")]) for v, t in zip(values, ts, strict=True)]
    raw = build_batch(records, compression=compression)
    view = memoryview(raw)
    return view, BatchHeader.parse(view)


def append_values(
    log: Log, values: list[bytes], timestamps: list[int] | None = None, epoch: int = 0
):
    batch, header = make_batch(values, timestamps)
    return log.append(batch, header, epoch)


def read_all(
    log: Log, start: int | None = None, max_bytes: int = 1 << 30
) -> list[tuple[BatchHeader, bytes]]:
    """Every batch from `start` to the end, fetching segment by segment like a client."""
    offset = log.log_start_offset if start is None else start
    out: list[tuple[BatchHeader, bytes]] = []
    while offset < log.log_end_offset:
        result = log.read(offset, max_bytes, log.log_end_offset)
        assert result.region is not None, f"nothing read at {offset}"
        data = log.read_bytes(result.region)
        batches = [(h, bytes(v)) for h, v in iter_batches(data, strict=True)]
        assert batches
        assert batches[0][0].base_offset == result.first_batch_offset
        out.extend(batches)
        offset = batches[-1][0].last_offset + 1
    return out


def small_config(**kw: object) -> LogConfig:
    base = {"segment_bytes": 1024, "index_interval_bytes": 128}
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def open_log(path: Path, config: LogConfig | None = None, **kw: object) -> Log:
    return Log.open(path / "t-0", config or small_config(), **kw)  # type: ignore[arg-type]


def assert_indexes_valid(log: Log) -> None:
    """Every .index entry on disk names a batch start and that batch's last offset; every
    .timeindex entry grows and names an offset inside the segment."""
    import struct

    for seg in log.segments:
        data = seg.read_bytes(0, seg.size)
        starts: dict[int, int] = {}
        pos = 0
        for h, _ in iter_batches(data, strict=True):
            starts[pos] = h.last_offset
            pos += h.size
        assert pos == seg.size
        index = list(struct.iter_unpack(">ii", seg.offset_index.path.read_bytes()))
        for rel, position in index:
            assert starts.get(position) == seg.base_offset + rel
        times = list(struct.iter_unpack(">qi", seg.time_index.path.read_bytes()))
        assert [t for t, _ in times] == sorted({t for t, _ in times})
        for _, rel in times:
            assert seg.base_offset <= seg.base_offset + rel < seg.next_offset
