from __future__ import annotations

import struct
from pathlib import Path

from typer.testing import CliRunner

from odradek.cli.dump_log import dump_file_lines, dump_log_lines
from odradek.cli.main import app
from odradek.protocol.records import (
    Compression,
    ControlRecordType,
    Record,
    build_batch,
    build_control_batch,
)


def _segment() -> bytes:
    first = build_batch([Record(-1, 1000, b"k1", b"v1", [("h", b"x")]),
                         Record(-1, 1001, None, b"v2", [])],
                        base_offset=0, partition_leader_epoch=0)
    second = build_batch([Record(-1, 2000, b"k3", b"compressed", [])], base_offset=2,
                         compression=Compression.GZIP, producer_id=7, producer_epoch=1,
                         base_sequence=5, partition_leader_epoch=0)
    return first + second


def test_batches_without_records() -> None:
    seg = _segment()
    lines = list(dump_log_lines(seg, print_records=False))
    assert len(lines) == 2
    first, second = lines
    assert first.startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 "
                            "lastSequence: -1 producerId: -1 producerEpoch: -1 "
                            "partitionLeaderEpoch: 0 isTransactional: false isControl: false ")
    assert " position: 0 CreateTime: 1001 " in first
    assert "magic: 2 compresscodec: none" in first
    assert first.endswith("isvalid: true")
    size = int(first.split(" size: ")[1].split()[0])
    assert f" position: {size} " in second
    assert "baseSequence: 5 lastSequence: 5 producerId: 7 producerEpoch: 1" in second
    assert "compresscodec: gzip" in second


def test_records() -> None:
    lines = list(dump_log_lines(_segment(), print_records=True))
    assert lines[1] == ("| offset: 0 CreateTime: 1000 keySize: 2 valueSize: 2 sequence: -1 "
                        "headerKeys: [h] key: k1 payload: v1")
    assert lines[2] == ("| offset: 1 CreateTime: 1001 keySize: -1 valueSize: 2 sequence: -1 "
                        "headerKeys: [] payload: v2")
    assert lines[4] == ("| offset: 2 CreateTime: 2000 keySize: 2 valueSize: 10 sequence: 5 "
                        "headerKeys: [] key: k3 payload: compressed")


def test_corrupt_crc_and_torn_tail() -> None:
    seg = bytearray(_segment())
    seg[-1] ^= 0xFF  # flip a byte inside the second batch's records
    seg += b"\x00" * 30  # a torn tail shorter than a header
    lines = list(dump_log_lines(bytes(seg), print_records=False))
    assert lines[0].endswith("isvalid: true")
    assert lines[1].endswith("isvalid: false")
    assert lines[2].startswith("Found 30 invalid bytes at the end of the log")


def test_control_batch() -> None:
    ctrl = build_control_batch(ControlRecordType.COMMIT, producer_id=3, producer_epoch=0,
                               coordinator_epoch=4, base_offset=9, timestamp=5)
    lines = list(dump_log_lines(ctrl, print_records=True))
    assert "isTransactional: true isControl: true" in lines[0]
    assert lines[1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 4")


def test_index_and_time_index_files(tmp_path: Path) -> None:
    index = tmp_path / "00000000000000000100.index"
    index.write_bytes(struct.pack(">iiii", 0, 0, 36, 4169) + b"\x00" * 80)
    timeindex = tmp_path / "00000000000000000100.timeindex"
    timeindex.write_bytes(struct.pack(">qi", 1700, 36) + b"\x00" * 48)
    assert list(dump_file_lines(index, False))[1:] == ["offset: 100 position: 0",
                                                       "offset: 136 position: 4169"]
    assert list(dump_file_lines(timeindex, False))[1:] == ["timestamp: 1700 offset: 136"]


def test_command_on_files(tmp_path: Path) -> None:
    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(_segment())
    res = CliRunner().invoke(app, ["dump-log", str(log), "--print-records"])
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    assert out[0] == f"Dumping {log}"
    assert out[1] == "Log starting offset: 0"
    assert sum(line.startswith("baseOffset:") for line in out) == 2
    assert sum(line.startswith("| offset:") for line in out) == 3
    missing = CliRunner().invoke(app, ["dump-log", str(tmp_path / "nope.log")])
    assert missing.exit_code == 1
