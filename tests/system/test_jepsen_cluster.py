"""Issue 15 harness: three odradek nodes in their own network namespaces, joined by a bridge
(RF 3, min.insync.replicas 2, unclean election off); confluent-kafka in the root namespace
produces and consumes through it; afterwards no namespace, link, mount, iptables rule or
process of the run is left, whether the run ends normally, by SIGTERM, or by kill -9 (then
the next run sweeps what it left)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.system.cluster_support import wait_until
from tests.system.jepsen.cluster import jepsen_cluster
from tests.system.jepsen.netns import Net, leftovers, run, sweep_stale

ROOT = Path(__file__).resolve().parents[2]


def root_rules() -> str:
    return run("iptables", "-w", "-S")


def test_cluster_in_namespaces_produce_consume_and_nothing_left(tmp_path: Path) -> None:
    rules_before = root_rules()
    with jepsen_cluster(tmp_path / "c") as cluster:
        tag = cluster.net.tag
        assert len(leftovers(tag)) >= 4  # the bridge, three namespaces (and host veths)
        node_pids = [n.proc.pid for n in cluster.nodes.values() if n.proc is not None]
        for i in cluster.nodes:  # each node really runs inside its own namespace
            assert cluster.ns_node(i).proc is not None
            assert cluster.ns_node(i).proc.pid in [int(p) for p in run(
                "ip", "netns", "pids", cluster.net.ns(i)).split()]
        props = cluster.ns_node(1).properties()
        assert props["min.insync.replicas"] == "2"
        assert props["default.replication.factor"] == "3"
        assert props["unclean.leader.election.enable"] == "false"
        cluster.create_topic("t", 3)
        assert all(len(p["replicas"]) == 3 for p in cluster.partitions("t").values())
        producer = Producer({"bootstrap.servers": cluster.client_bootstrap, "acks": "all",
                             "enable.idempotence": True})
        acked: list[int] = []
        for v in range(300):
            producer.produce("t", str(v).encode(), partition=v % 3,
                             on_delivery=lambda e, m: acked.append(int(m.value())) if e is None
                             else None)
        assert producer.flush(60) == 0
        assert sorted(acked) == list(range(300))
        consumer = Consumer({"bootstrap.servers": cluster.client_bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.assign([TopicPartition("t", p, 0) for p in range(3)])
        got: list[int] = []
        deadline = time.monotonic() + 120
        while len(got) < 300 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got.append(int(msg.value()))
        consumer.close()
        assert sorted(got) == list(range(300))
        # a partition inside the namespaces, then healed: the rules live there, not here
        cluster.net.partition([[1], [2, 3]])
        assert "DROP" in cluster.net.rules(1)
        assert root_rules() == rules_before
    assert leftovers(tag) == []
    assert root_rules() == rules_before
    for p in node_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


CHILD = """
import signal, sys, time
# a parent that ignores SIGINT (a shell's background job, some runners) passes SIG_IGN on:
# the run under test is an interactive one, where Ctrl-C raises KeyboardInterrupt
signal.signal(signal.SIGINT, signal.default_int_handler)
from tests.system.jepsen.netns import Net
net = Net(2)
print(net.pid, flush=True)
subprocess = __import__("subprocess")
# a process inside a namespace, as a node would be
subprocess.Popen(net.exec_prefix(1) + ["sleep", "600"], start_new_session=True)
print("ready", flush=True)
time.sleep(600)
"""


def _child() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "ready"
    assert leftovers(pid)
    return proc, pid


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_interrupted_run_cleans_up(sig: signal.Signals) -> None:
    proc, pid = _child()
    proc.send_signal(sig)
    proc.wait(60)
    assert leftovers(pid) == []


def test_killed_run_is_swept_by_the_next() -> None:
    proc, pid = _child()
    ns = f"odj{pid}a-n1"
    inside = [int(p) for p in run("ip", "netns", "pids", ns).split()]
    assert inside
    proc.kill()
    proc.wait(60)
    assert leftovers(pid)  # kill -9: nothing could run
    removed = sweep_stale()
    assert any(ns in r for r in removed)
    assert leftovers(pid) == []
    for p in inside:
        wait_until(lambda p=p: not Path(f"/proc/{p}").exists() or
                   "Z" in Path(f"/proc/{p}/stat").read_text().split()[2],
                   f"process {p} of the swept namespace gone", 30)


def test_two_nets_of_one_process_apart() -> None:
    with Net(1) as a, Net(1) as b:
        assert a.subnet != b.subnet and a.bridge != b.bridge and a.ns(1) != b.ns(1)
        b.close()
        assert leftovers(a.tag) and leftovers(b.tag) == []
    assert leftovers(a.tag) == []
