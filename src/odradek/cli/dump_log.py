"""`odradek dump-log FILE...`: print a segment's batches (and records) like kafka-dump-log.

Also prints the entries of `.index` (offset -> position) and `.timeindex` (timestamp ->
offset) files. Reads the files directly: the node need not run.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from odradek.protocol.records import BatchHeader

# odradek.protocol (and kio under it) is imported inside the functions that read files, so
# that `odradek --help` does not load it.

LOG_OVERHEAD = 12  # base offset + batch length, before the length's payload
_INDEX_ENTRY = struct.Struct(">ii")      # relative offset, position
_TIME_INDEX_ENTRY = struct.Struct(">qi")  # timestamp, relative offset


def base_offset_of(path: Path) -> int:
    """Segment files are named after their base offset; anything else counts as 0."""
    try:
        return int(path.name.split(".", 1)[0])
    except ValueError:
        return 0


def _codec_name(attributes: int) -> str:
    names = ("none", "gzip", "snappy", "lz4", "zstd")
    codec = attributes & 0x07
    return names[codec] if codec < len(names) else f"unknown({codec})"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def dump_log_lines(data: bytes | memoryview, print_records: bool) -> Iterator[str]:
    """One line per batch (and per record with `print_records`); a torn tail is reported."""
    from odradek.protocol.errors import KafkaError, ProtocolError
    from odradek.protocol.records import BATCH_HEADER_SIZE, BatchHeader, batch_crc_ok

    view = memoryview(data)
    end = len(view)
    pos = 0
    while pos < end:
        left = end - pos
        try:
            header = BatchHeader.parse(view, pos)
        except (KafkaError, ProtocolError) as exc:
            if left < BATCH_HEADER_SIZE:
                break
            yield f"Error at position {pos}: {exc}"
            break
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD or header.size > left:
            break
        batch = view[pos : pos + header.size]
        yield _batch_line(header, pos, batch_crc_ok(batch))
        if print_records:
            yield from _record_lines(header, batch)
        pos += header.size
    if pos < end:
        yield f"Found {end - pos} invalid bytes at the end of the log (from position {pos})"


def _batch_line(h: BatchHeader, position: int, valid: bool) -> str:
    ts_name = "LogAppendTime" if h.timestamp_type else "CreateTime"
    horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
        f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
        f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
        f"partitionLeaderEpoch: {h.partition_leader_epoch} "
        f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
        f"deleteHorizonMs: {horizon} position: {position} {ts_name}: {h.max_timestamp} "
        f"size: {h.size} magic: {h.magic} compresscodec: {_codec_name(h.attributes)} "
        f"crc: {h.crc} isvalid: {_bool(valid)}"
    )


def _record_lines(h: BatchHeader, batch: memoryview) -> Iterator[str]:
    from odradek.protocol.errors import KafkaError, ProtocolError
    from odradek.protocol.records import decode_records

    try:
        records = decode_records(h, batch)
    except (KafkaError, ProtocolError) as exc:
        yield f"| cannot decode records: {exc}"
        return
    ts_name = "LogAppendTime" if h.timestamp_type else "CreateTime"
    for rec in records:
        sequence = -1 if h.base_sequence < 0 else \
            (h.base_sequence + rec.offset - h.base_offset) & 0x7FFFFFFF
        line = (
            f"| offset: {rec.offset} {ts_name}: {rec.timestamp} "
            f"keySize: {-1 if rec.key is None else len(rec.key)} "
            f"valueSize: {-1 if rec.value is None else len(rec.value)} "
            f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in rec.headers)}]"
        )
        if h.is_control:
            line += " " + _control_text(rec)
        else:
            if rec.key is not None:
                line += f" key: {_text(rec.key)}"
            if rec.value is not None:
                line += f" payload: {_text(rec.value)}"
        yield line


def _control_text(rec: object) -> str:
    from odradek.protocol.errors import KafkaError, ProtocolError
    from odradek.protocol.records import ControlRecordType, decode_control_record

    try:
        ctrl = decode_control_record(rec)  # type: ignore[arg-type]
    except (KafkaError, ProtocolError) as exc:
        return f"controlRecord: invalid ({exc})"
    try:
        name = ControlRecordType(ctrl.type).name
    except ValueError:
        name = f"UNKNOWN({ctrl.type})"
    if ctrl.coordinator_epoch is not None:
        return f"endTxnMarker: {name} coordinatorEpoch: {ctrl.coordinator_epoch}"
    return f"controlType: {name}({ctrl.type})"


def dump_index_lines(data: bytes, base_offset: int) -> Iterator[str]:
    """`offset: O position: P`; stops at the zeroed, preallocated tail of an active index."""
    for i in range(len(data) // _INDEX_ENTRY.size):
        relative, position = _INDEX_ENTRY.unpack_from(data, i * _INDEX_ENTRY.size)
        if i > 0 and relative == 0 and position == 0:
            break
        yield f"offset: {base_offset + relative} position: {position}"


def dump_time_index_lines(data: bytes, base_offset: int) -> Iterator[str]:
    """`timestamp: T offset: O`; stops at the zeroed, preallocated tail."""
    for i in range(len(data) // _TIME_INDEX_ENTRY.size):
        timestamp, relative = _TIME_INDEX_ENTRY.unpack_from(data, i * _TIME_INDEX_ENTRY.size)
        if timestamp == 0 and relative == 0:
            break
        yield f"timestamp: {timestamp} offset: {base_offset + relative}"


def dump_file_lines(path: Path, print_records: bool) -> Iterator[str]:
    data = path.read_bytes()
    base = base_offset_of(path)
    yield f"Dumping {path}"
    dumpers: dict[str, Callable[[], Iterator[str]]] = {
        ".log": lambda: dump_log_lines(data, print_records),
        ".index": lambda: dump_index_lines(data, base),
        ".timeindex": lambda: dump_time_index_lines(data, base),
    }
    dumper = dumpers.get(path.suffix)
    if dumper is None:
        yield f"Ignoring unknown file {path}"
        return
    if path.suffix == ".log":
        yield f"Log starting offset: {base}"
    yield from dumper()


def dump_log(
    files: list[Path] = typer.Argument(..., metavar="FILE...",
                                       help="Segment files: .log, .index or .timeindex."),
    print_records: bool = typer.Option(False, "--print-records", "--print-data-log",
                                       help="Also print every record with its key and payload."),
) -> None:
    """Print the batches of log segment files (and their index entries), like kafka-dump-log."""
    failed = False
    out = sys.stdout
    for path in files:
        try:
            for line in dump_file_lines(path, print_records):
                out.write(line + "\n")
        except OSError as exc:
            print(f"Error: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            failed = True
    if failed:
        raise typer.Exit(1)
