"""`odradek dump-log` over the segment files a real node wrote."""

from __future__ import annotations

import re

from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess


def test_dump_log_of_a_real_segment(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    # A small index interval makes the node write index entries for a few records.
    ok("topic", "create", "cli-dump", "-p", "1", "-c", "index.interval.bytes=200", bootstrap=b)
    for chunk in range(3):
        lines = "".join(f"key{chunk}-{i}|payload {chunk}-{i} {'y' * 100}\n" for i in range(20))
        ok("produce", "cli-dump", "-k", "|", "-H", "src=test", "--acks", "all", input=lines,
           bootstrap=b)
    broker.stop()

    part = broker.data_dir / "cli-dump-0"
    log = part / "00000000000000000000.log"
    out = ok("dump-log", str(log), "--print-records").splitlines()
    assert out[0] == f"Dumping {log}"
    assert out[1] == "Log starting offset: 0"
    batches = [line for line in out if line.startswith("baseOffset:")]
    records = [line for line in out if line.startswith("| offset:")]
    assert len(records) == 60
    assert batches, out
    assert all(line.endswith("isvalid: true") and " magic: 2 " in line for line in batches)
    # Batches are contiguous in offsets and positions.
    next_offset, next_position = 0, 0
    for line in batches:
        fields = dict(re.findall(r"(\w+): (\S+)", line))
        assert int(fields["baseOffset"]) == next_offset
        assert int(fields["position"]) == next_position
        next_offset = int(fields["lastOffset"]) + 1
        next_position += int(fields["size"])
    assert next_position == log.stat().st_size
    assert records[0].startswith("| offset: 0 CreateTime: ")
    # librdkafka without idempotence sends no sequence numbers.
    assert records[0].endswith("keySize: 6 valueSize: 112 sequence: -1 headerKeys: [src] "
                               f"key: key0-0 payload: payload 0-0 {'y' * 100}")
    assert records[59].split()[2] == "59"

    index = ok("dump-log", str(part / "00000000000000000000.index")).splitlines()
    entries = [line for line in index[1:] if line.startswith("offset:")]
    assert entries, index
    positions = {int(f["position"]): int(f["baseOffset"]) for f in
                 (dict(re.findall(r"(\w+): (\S+)", b)) for b in batches)}
    for entry in entries:
        offset, position = (int(x) for x in re.findall(r"-?\d+", entry))
        # Every index entry points at the start of a batch holding that offset.
        assert position in positions
        assert positions[position] <= offset

    timeindex = ok("dump-log", str(part / "00000000000000000000.timeindex")).splitlines()
    assert timeindex[0].startswith("Dumping ")
    assert all(line.startswith("timestamp: ") for line in timeindex[1:])


def test_dump_log_of_a_missing_file(tmp_path: object) -> None:
    res = odradek("dump-log", "/nonexistent/00000000000000000000.log")
    assert res.returncode == 1
    assert "cannot read" in res.stderr
