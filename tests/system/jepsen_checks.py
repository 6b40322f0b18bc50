"""What every short seeded run of tests/system/test_jepsen_<family>.py asserts: the fault was
made (the history has it), no nemesis step failed, and the checker found nothing Kafka
forbids. Never a timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.system.jepsen.history import load
from tests.system.jepsen.testing import short_run


def assert_clean_run(family: str, seed: int, workloads: list[str], length: float = 8.0) -> None:
    result = short_run(family, seed, workloads, length)
    ops = load(Path(result.out) / "history.jsonl")
    made = [o for o in ops if o.process == "nemesis" and o.f == family]
    if not made:
        pytest.fail(f"seed {seed}: no {family} fault in the history ({result.out})")
    assert not result.workload_errors, (
        f"{family} seed {seed}: a workload died: {result.workload_errors} ({result.out})")
    assert not result.nemesis_errors, (
        f"seed {seed}: nemesis errors {result.nemesis_errors} ({result.out})")
    assert not result.found, (
        f"{family} seed {seed}: anomalies {result.found} (history {result.out})\n"
        f"{result.table}\nfaults: {json.dumps([o.value for o in made], default=str)[:2000]}")
    assert any(o.type == "ok" and o.f in ("send", "txn") for o in ops), "nothing acknowledged"
