"""Damage to `__cluster_metadata-0`, as a disk or a crash leaves it, against a real node.

- A flipped byte in a batch the node had flushed (committed) stops the node at start with
  one line naming the file, the offset and what to do; no partition directory is touched.
- A torn tail the node never flushed (a crash mid-write) is cut with a log line, and no
  producer id is handed out twice: a new idempotent producer gets a new id.
- `odradek storage verify` reports both.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Producer

from odradek.storage.verify import scan_segment
from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

METADATA = "__cluster_metadata-0"
# base_offset .. producer_id of a v2 batch header
_PID = struct.Struct(">q")
_PID_AT = 43


def verify(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", "storage", "verify",
                           "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120)


def produce_idempotent(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 0})
    errors: list[object] = []
    for i in range(n):
        p.produce(topic, value=b"v%d" % i,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        p.flush(30)  # one batch per record: each carries the producer id
    assert p.flush(30) == 0
    assert not errors, errors


def producer_ids(partition_dir: Path) -> list[int]:
    """The producer id of every batch in the partition, in order."""
    out = []
    for seg in sorted(partition_dir.glob("*.log")):
        scan = scan_segment(seg, int(seg.name[:20]))
        with open(seg, "rb") as f:
            data = f.read()
        out += [_PID.unpack_from(data, pos + _PID_AT)[0] for pos in scan.positions]
    return out


def metadata_segment(data_dir: Path) -> Path:
    segments = sorted((data_dir / METADATA).glob("*.log"))
    assert len(segments) == 1, segments
    return segments[0]


def partition_files(data_dir: Path) -> dict[str, bytes]:
    """Every file under every partition directory, with its content."""
    out = {}
    for d in sorted(data_dir.iterdir()):
        if d.is_dir() and d.name != METADATA:
            for f in sorted(d.iterdir()):
                out[f"{d.name}/{f.name}"] = f.read_bytes()
    return out


def test_flipped_byte_in_flushed_metadata_stops_the_node(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        for name in ("first", "second", "third"):
            create_topic(node.bootstrap, name, 2)
        produce_idempotent(node.bootstrap, "second", 5)
    finally:
        assert node.stop() == 0, node.log()
    before = partition_files(node.data_dir)
    assert "second-0/00000000000000000000.log" in before

    seg = metadata_segment(node.data_dir)
    scan = scan_segment(seg, 0)
    middle = scan.positions[len(scan.positions) // 2]
    damaged_offset = scan.last_offsets[len(scan.positions) // 2 - 1] + 1
    with open(seg, "r+b") as f:  # one byte of a record, inside what the CRC covers
        f.seek(middle + 64)
        byte = f.read(1)
        f.seek(middle + 64)
        f.write(bytes([byte[0] ^ 0x40]))
    size = seg.stat().st_size

    report = verify(node.data_dir)
    assert report.returncode == 1, report.stdout + report.stderr
    assert f"batch at byte {middle} (offset {damaged_offset}) fails its CRC" in report.stdout
    assert "below the committed offset" in report.stdout

    metadata_before = {f.name: f.read_bytes() for f in seg.parent.iterdir()}
    node.log_path.write_text("")
    cmd = node.command()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    lines = [ln for ln in out.splitlines() if "cannot start" in ln]
    assert len(lines) == 1, out
    line = lines[0]
    assert str(seg) in line and f"offset {damaged_offset}" in line, line
    assert "Restore" in line and "quorum-commit" in line, line
    assert "Traceback" not in out, out
    # nothing was cut, no partition directory was touched, renamed or created
    assert seg.stat().st_size == size
    assert {f.name: f.read_bytes() for f in seg.parent.iterdir()} == metadata_before
    assert partition_files(node.data_dir) == before
    assert not [d for d in node.data_dir.iterdir() if d.name.endswith(("-stray", "-delete"))]


def test_cut_flushed_tail_stops_the_node(tmp_path: Path) -> None:
    """The issue's lost producer-id block: the flushed last batch cut away is damage too."""
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        create_topic(node.bootstrap, "pids", 1)
        produce_idempotent(node.bootstrap, "pids", 1)  # allocates a producer-id block
    finally:
        node.kill9()
    seg = metadata_segment(node.data_dir)
    scan = scan_segment(seg, 0)
    with open(seg, "r+b") as f:
        f.truncate(scan.positions[-1] + 20)
    done = subprocess.run(node.command(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot start" in done.stdout + done.stderr
    assert seg.stat().st_size == scan.positions[-1] + 20


def test_torn_unflushed_tail_is_cut_and_no_producer_id_is_reused(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data")
    node.start()
    try:
        create_topic(node.bootstrap, "pids", 1)
        produce_idempotent(node.bootstrap, "pids", 3)
    finally:
        node.kill9()
    first_ids = set(producer_ids(node.data_dir / "pids-0"))
    assert len(first_ids) == 1, first_ids

    # a crash in the middle of writing a batch the node never flushed nor committed: the
    # tail of the metadata log holds part of a batch (here: the start of a copy of the last)
    seg = metadata_segment(node.data_dir)
    scan = scan_segment(seg, 0)
    good_size = seg.stat().st_size
    with open(seg, "rb") as f:
        f.seek(scan.positions[-1])
        last = f.read()
    with open(seg, "ab") as f:
        f.write(last[: len(last) - 10])
        os.fsync(f.fileno())

    report = verify(node.data_dir)
    assert report.returncode == 1, report.stdout
    assert "is torn" in report.stdout, report.stdout
    assert "past the committed offset" in report.stdout, report.stdout

    node.start()
    try:
        log_text = node.log()
        cut = [ln for ln in log_text.splitlines() if METADATA in ln and "torn or corrupt" in ln]
        assert len(cut) == 1, log_text
        assert f"at byte {good_size} " in cut[0] and f"cut {len(last) - 10} bytes" in cut[0], cut
        produce_idempotent(node.bootstrap, "pids", 3)
        ids = producer_ids(node.data_dir / "pids-0")
        assert len(ids) == 6
        second_ids = set(ids[3:])
        assert len(second_ids) == 1 and not second_ids & first_ids, (first_ids, second_ids)
    finally:
        assert node.stop() == 0, node.log()
    report = verify(node.data_dir)
    assert report.returncode == 0, report.stdout
