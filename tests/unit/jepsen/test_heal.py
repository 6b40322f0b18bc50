"""The end-of-run heal (finding 10) on real processes, no cluster: a node still going down on
its own when the heal looks is started again once it has exited; a paused node is resumed
and a dead one started; a node that never stays up fails the heal at its deadline with what
it saw. And `play`'s stop of the workload threads: they are joined before the history is
closed, and one that does not stop is reported, not left to die on a closed history."""

from __future__ import annotations

import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.system.jepsen.heal import HealFailed, heal_nodes
from tests.system.jepsen.history import History, load
from tests.system.jepsen.run import stop_workloads


class ProcNode:
    """A node that is a real process (`sleep`); `exits_at_once` makes every start a process
    that has already exited when start() returns (a node that never stays up)."""

    def __init__(self, node_id: int, exits_at_once: bool = False) -> None:
        self.node_id = node_id
        self.paused = False
        self.exits_at_once = exits_at_once
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ProcNode:
        if self.exits_at_once:
            self.proc = subprocess.Popen(["false"])
            self.proc.wait()
        else:
            self.proc = subprocess.Popen(["sleep", "600"])
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def state(self) -> str:
        assert self.proc is not None
        return Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def nodes() -> list[ProcNode]:
    made = [ProcNode(i) for i in (1, 2, 3)]
    yield made
    for n in made:
        n.kill()


def test_a_node_that_exits_while_the_heal_waits_is_started_again(nodes: list[ProcNode]) -> None:
    for n in nodes:
        n.start()
    stopping = nodes[0]
    first = stopping.proc
    asked: list[int] = []

    def ready() -> str:
        # node 1 is still stopping on its own (fsync EIO) when the heal looks: alive, so not
        # started; it exits while the cluster is asked whether it is ready
        if not asked:
            assert first is not None
            first.terminate()
            first.wait()
        asked.append(1)
        return "ready"

    done = heal_nodes(nodes, ready, timeout=120, every=0.01)
    assert done["started"] == {1: 1}
    assert done["exits"] == {1: [-signal.SIGTERM]}
    assert len(asked) == 2  # ready again after the restart, with every node alive
    assert all(n.alive() for n in nodes) and stopping.proc is not first


def test_a_paused_node_is_resumed_and_a_dead_one_started(nodes: list[ProcNode]) -> None:
    nodes[0].start()
    nodes[1].start()
    nodes[1].pause()
    done = heal_nodes(nodes, lambda: "ready", timeout=120, every=0.01)
    assert done["started"] == {3: 1} and done["exits"] == {}
    assert not nodes[1].paused and nodes[1].state() != "T"
    assert all(n.alive() for n in nodes)


def test_a_node_that_never_stays_up_fails_the_heal_at_its_deadline(
        nodes: list[ProcNode]) -> None:
    nodes[1].start()
    nodes[2].start()
    nodes[0].exits_at_once = True

    def ready() -> str:
        raise ConnectionError("no quorum leader")

    with pytest.raises(HealFailed) as info:
        heal_nodes(nodes, ready, timeout=1.0, every=0.01)
    text = str(info.value)
    assert "dead now [1]" in text and "no quorum leader" in text and "started {1: " in text


def test_workload_threads_are_joined_before_the_history_closes(tmp_path: Path) -> None:
    history = History(tmp_path / "h.jsonl")
    stop = threading.Event()
    release = threading.Event()
    died: list[BaseException] = []

    def workload() -> None:
        p = history.new_process()
        try:
            while not stop.is_set():
                history.invoke(p, "send", [["send", "k", 1]])
            history.nemesis("workload-done", {})  # its last op, after the stop
        except BaseException as exc:  # "history is closed" would land here
            died.append(exc)

    def stuck() -> None:
        release.wait()  # a client call that does not return at the stop

    w = threading.Thread(target=workload, name="w", daemon=True)
    s = threading.Thread(target=stuck, name="s", daemon=True)
    w.start()
    s.start()
    try:
        assert stop_workloads(stop, [w], timeout=120) == []
        assert not w.is_alive()
        threads = [s]
        assert stop_workloads(stop, threads, timeout=0) == ["s: still running 0 s after the stop"]
        assert stop_workloads(stop, threads, timeout=120) == []  # reported once, not waited again
    finally:
        release.set()
    history.close()
    assert died == []
    assert [op.f for op in load(tmp_path / "h.jsonl")][-1] == "workload-done"
