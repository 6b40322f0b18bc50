"""kill -9 of a node while its log cleaner works, at several points of a pass; after each
restart no acknowledged record is lost or duplicated and no cleaner temp file is left."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess
from tests.support.partition_reader import read_partition

TOPIC = "crash-compact"
KEYS = 2_000
CLEANING = {"log.cleaner.backoff.ms": "100", "log.segment.delete.delay.ms": "60000"}
QUIET = {"log.cleaner.enable": "false"}
TEMP_SUFFIXES = (".cleaned", ".swap")


def produce_round(bootstrap: str, r: int, produced: dict[int, tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 65536,
                  "compression.type": "lz4" if r % 2 else "none"})
    errors: list[str] = []

    def cb(err: object, m: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            produced[m.offset()] = (m.key(), m.value())  # type: ignore[attr-defined]

    for k in range(KEYS):
        key = b"key-%05d" % k
        value = None if (k + r) % 17 == 0 else b"%s@%d|" % (key, r) + b"p" * 300
        p.produce(TOPIC, partition=0, key=key, value=value, on_delivery=cb)
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors


def read_all(bootstrap: str, end: int) -> list[tuple[int, bytes | None, bytes | None]]:
    return read_partition(bootstrap, TOPIC, end, group="crash-check", timeout=120)


def files(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


def wait_for(cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.002)
    return False


TRIGGERS: dict[str, Callable[[Path], bool]] = {
    # a cleaned segment is being written
    "writing": lambda d: any(n.endswith(".log.cleaned") for n in files(d)),
    # a bit later: mid-pass, between swaps of successive groups
    "mid-pass": lambda d: sum(n.endswith(".log.deleted") for n in files(d)) >= 1,
    # later still: several groups swapped
    "late": lambda d: sum(n.endswith(".log.deleted") for n in files(d)) >= 3,
}


@pytest.mark.slow
def test_kill9_during_cleaning_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = BrokerProcess(data, settings=QUIET)
    node.start()
    port = node.port
    create_topic(node.bootstrap, TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": "262144",
                                              "min.cleanable.dirty.ratio": "0.01",
                                              "delete.retention.ms": "86400000"})
    produced: dict[int, tuple[bytes, bytes | None]] = {}
    part = data / f"{TOPIC}-0"
    for r, (point, trigger) in enumerate(TRIGGERS.items()):
        produce_round(node.bootstrap, r, produced)
        produce_round(node.bootstrap, r + 10, produced)
        node.stop()
        # restart with the cleaner on, kill -9 when the pass reaches the point
        node = BrokerProcess(data, port=port, settings=CLEANING)
        node.start()
        hit = wait_for(lambda trigger=trigger: trigger(part))
        node.kill9()
        assert hit, f"the cleaner never reached {point}: {files(part)}"
        # restart without the cleaner: what recovery left must be a valid log
        node = BrokerProcess(data, port=port, settings=QUIET)
        node.start()
        left = [n for n in files(part) if n.endswith(TEMP_SUFFIXES)]
        assert left == [], f"after a crash at {point}: {left}"
        end = max(produced) + 1
        view = read_all(node.bootstrap, end)
        offsets = [o for o, _, _ in view]
        assert offsets == sorted(set(offsets)), f"duplicated or reordered offsets at {point}"
        for o, k, v in view:
            assert produced[o] == (k, v), f"offset {o} changed after a crash at {point}"
        latest: dict[bytes, bytes | None] = {}
        for o in sorted(produced):
            latest[produced[o][0]] = produced[o][1]
        assert {k: v for _, k, v in view} == latest, f"lost the latest value of a key at {point}"
        # offsets continue after the restart
        p = Producer({"bootstrap.servers": node.bootstrap})
        offsets_after: list[int] = []
        p.produce(TOPIC, partition=0, key=b"after", value=b"crash",
                  on_delivery=lambda e, m, out=offsets_after: out.append(m.offset()))
        p.flush(30)
        produced[offsets_after[0]] = (b"after", b"crash")
        assert offsets_after == [end]
    node.stop()
