"""Finding 6 of docs/reliability.md: W1's subscribe consumers hung for good in a synchronous
commit (confluent-kafka's Consumer.commit takes no timeout) while `__consumer_offsets` had no
leader. The loop now gives up on such a commit: it is recorded as info (unknown outcome), the
consumer is abandoned without a close (its handle is inside the stuck call) and a new one
joins the same group as a new process.

The consumers here are real librdkafka consumers pointed at an address where nothing listens;
only their `consume` and `commit` stand for a broker that serves records and a coordinator
that never answers."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Message, TopicPartition

from tests.system.jepsen.env import Env
from tests.system.jepsen.history import History, Op, load
from tests.system.jepsen.workloads import clients, common

NOWHERE = "127.0.0.1:1"  # nothing listens: the consumers are created, never connect
DEADLINE = 120.0


class CoordinatorGone(Consumer):
    """Each consume returns the next record of jepsen-0; commit blocks until `release` is set
    when `blocks` (as a commit waiting for a coordinator that never comes back), else returns
    the committed position."""

    def __init__(self, cfg: dict[str, str], release: threading.Event, blocks: bool) -> None:
        super().__init__(cfg)
        self.cfg, self.release, self.blocks = cfg, release, blocks
        self.offset = 0
        self.closed = False

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:  # type: ignore[override]
        time.sleep(0.01)  # stands for the poll's wait; keeps the loop from spinning
        self.offset += 1
        return [Message(topic="jepsen", partition=0, offset=self.offset - 1, value=b"7")]

    def commit(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if self.blocks:
            self.release.wait()
            return None
        return [TopicPartition("jepsen", 0, self.offset)]

    def close(self) -> None:
        self.closed = True
        super().close()


def run_loop(tmp_path: Path, blocks: bool, until: Any) -> tuple[list[Op], list[CoordinatorGone]]:
    """The subscribe loop with CoordinatorGone consumers until `until(history ops)` holds."""
    release = threading.Event()
    stop = threading.Event()
    made: list[CoordinatorGone] = []

    def make(cfg: dict[str, str]) -> Consumer:
        made.append(CoordinatorGone(cfg, release, blocks))
        return made[-1]

    env = Env(NOWHERE, ["jepsen"], 1, NOWHERE)
    path = tmp_path / "history.jsonl"
    with History(path) as h:
        t = threading.Thread(
            target=clients.subscribe_consumer_loop,
            args=(env, h, random.Random(1), "w1-test", stop),
            kwargs={"consumer": make},
            daemon=True,
        )
        t.start()
        try:
            deadline = time.monotonic() + DEADLINE
            while not until(load(path)):
                if time.monotonic() > deadline or not t.is_alive():
                    pytest.fail(f"the loop wrote {[o.to_dict() for o in load(path)]}")
                time.sleep(0.02)
        finally:
            stop.set()
            t.join(DEADLINE)
            release.set()
        assert not t.is_alive(), "the subscribe loop did not stop"
    return load(path), made


def crashes(ops: list[Op]) -> list[Op]:
    return [o for o in ops if o.f == "crash" and o.type == "ok"]


def test_a_stuck_commit_is_info_and_its_consumer_abandoned_for_a_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "STUCK_AFTER", 0.05)
    monkeypatch.setattr(clients, "COMMIT_TIMEOUT", 0.0)
    ops, made = run_loop(
        tmp_path, blocks=True, until=lambda ops: len([o for o in ops if o.f == "crash"]) >= 4
    )
    invokes = [o for o in ops if o.f == "crash" and o.type == "invoke"]
    abandoned = [o for o in invokes if str(o.value["reason"]).startswith("abandoned")]
    assert len(abandoned) >= 2
    assert "commit did not return" in abandoned[0].value["reason"]
    # each abandoned consumer: subscribed, read, its commit left unknown, then given up on
    for crash in abandoned:
        mine = [o for o in ops if o.process == crash.process and o.type != "invoke"]
        assert [o.f for o in mine] == ["subscribe", "poll", "commit", "crash"]
        assert mine[1].type == "ok" and mine[1].value[-1][0] == "poll"
        assert mine[2].type == "info" and "did not return" in str(mine[2].error)
    # a new process after each, in the same group; none of the abandoned ones was closed
    processes = [o.process for o in ops if o.f == "subscribe" and o.type == "ok"]
    assert len(set(processes)) == len(processes) >= len(abandoned)
    assert {c.cfg["group.id"] for c in made} == {"w1-test"}
    assert len(made) == len(processes)
    assert not any(c.closed for c in made[: len(abandoned)])


def test_a_commit_that_returns_is_ok_and_the_consumer_closed_at_the_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "STUCK_AFTER", 120.0)
    ops, made = run_loop(
        tmp_path,
        blocks=False,
        until=lambda ops: len([o for o in ops if o.f == "commit" and o.type == "ok"]) >= 3,
    )
    commits = [o for o in ops if o.f == "commit" and o.type != "invoke"]
    assert commits and all(o.type == "ok" for o in commits)
    assert commits[0].value == {"jepsen-0": 1}
    assert all(o.value == {"revoked": "all"} for o in crashes(ops))
    replaced = [o for o in ops if o.f == "crash" and o.type == "invoke"]
    assert replaced and all(o.value["reason"] == "replaced" for o in replaced)
    assert made and all(c.closed for c in made)
