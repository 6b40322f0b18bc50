"""What a real node reads of its record data at start-up (issue 22, point 5).

- After a clean shutdown (SIGTERM) no log is recovered and no producer state is rebuilt:
  every log opens from its indexes and its producer snapshot, the metadata log included.
- After kill -9, a log recovers exactly the bytes past its recovery point (the node says
  how many), and its producer state is read from the snapshot the clean shutdown left.
- A payload byte flipped below the recovery point (only a scan would notice) is not
  scanned: the node starts, nothing is cut, every other record is served, and
  `odradek storage verify` is what finds the damage.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.protocol.records import iter_batches
from odradek.storage.checkpoints import RECOVERY_POINT_CHECKPOINT, read_offsets
from tests.support.background import create_topic, wait_for_topic
from tests.support.broker import BrokerProcess

TOPIC = "reads"
PAD = b"." * 200


def produce(bootstrap: str, first: int, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5})
    errors: list[object] = []
    for i in range(first, first + n):
        p.produce(TOPIC, key=b"%d" % i, value=b"%d" % i + PAD,
                  on_delivery=lambda err, _m: errors.append(err) if err else None)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:3]


def consume_all(bootstrap: str, n: int) -> dict[int, bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                  "enable.auto.commit": False})
    out: dict[int, bytes] = {}
    try:
        c.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 60
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(1000, timeout=0.5):
                assert m.error() is None, m.error()
                out[m.offset()] = m.value()
    finally:
        c.close()
    return out


def new_lines(node: BrokerProcess, since: int) -> str:
    return node.log_path.read_bytes()[since:].decode(errors="replace")


def batches_of(path: Path) -> list[tuple[int, int, int]]:
    """(position, base offset, size) of every batch of a segment file."""
    out, pos = [], 0
    for h, _ in iter_batches(path.read_bytes(), strict=True):
        out.append((pos, h.base_offset, h.size))
        pos += h.size
    return out


def test_clean_start_reads_nothing_and_kill9_start_reads_only_the_tail(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # the recovery-point checkpoint moves only at shutdown here: the test knows where it is
    node = BrokerProcess(data, settings={"log.flush.offset.checkpoint.interval.ms": "3600000"})
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        for first in range(0, 3000, 500):  # several batches: the damage goes in the first
            produce(node.bootstrap, first, 500)
        assert node.stop() == 0

        # --- SIGTERM restart: nothing recovered, no producer state rebuilt, for any log
        mark = node.log_path.stat().st_size
        node.start()
        wait_for_topic(node.bootstrap, TOPIC, 1)
        text = new_lines(node, mark)
        assert "past the recovery point" not in text, text
        assert "rebuilt the indexes" not in text and "removing the index" not in text, text
        assert "producer state rebuilt" not in text, text
        assert "recovering unflushed segment" not in text, text
        produce(node.bootstrap, 3000, 1000)

        # --- kill -9 restart: only the bytes past the recovery point are read
        node.kill9()
        point = read_offsets(data / RECOVERY_POINT_CHECKPOINT)[(TOPIC, 0)]
        assert point == 3000  # the clean shutdown's log end offset
        seg = sorted((data / f"{TOPIC}-0").glob("*.log"))[-1]
        batches = batches_of(seg)
        tail = sum(size for _, base, size in batches if base >= point)
        assert tail > 0
        # flip a byte of the first record's value, below the recovery point and before the
        # batch the start walks up to it from: only a CRC scan of that batch could notice it
        pos, base, _ = batches[0]
        assert base == 0 and batches[1][1] < point
        raw = bytearray(seg.read_bytes())
        at = raw.index(b"0" + PAD[:20], pos)
        raw[at + 5] ^= 0x01
        seg.write_bytes(bytes(raw))

        mark = node.log_path.stat().st_size
        node.start()
        wait_for_topic(node.bootstrap, TOPIC, 1)
        text = new_lines(node, mark)
        said = re.findall(rf"{TOPIC}-0: recovered (\d+) bytes past the recovery point (\d+)",
                          text)
        assert said == [(str(tail), str(point))], text
        rebuilt = re.findall(rf"{TOPIC}-0: producer state rebuilt from offset (\d+)", text)
        assert rebuilt == [str(point)], text
        assert "torn or corrupt" not in text, text

        got = consume_all(node.bootstrap, 4000)
        assert sorted(got) == list(range(4000))  # nothing cut
        damaged = [o for o, v in got.items() if v != b"%d" % o + PAD]
        assert damaged == [0], damaged[:5]
        produce(node.bootstrap, 4000, 10)  # the idempotent producer path still works
        assert node.stop() == 0
    finally:
        node.kill9()

    verify = subprocess.run([sys.executable, "-m", "odradek.cli.main", "storage", "verify",
                             "--data-dir", str(data)], capture_output=True, text=True,
                            timeout=120)
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert any("DAMAGE" in line and f"{TOPIC}-0" in line for line in verify.stdout.splitlines()), (
        verify.stdout)
