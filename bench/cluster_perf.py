"""Issue 14's cluster phase: 3 real nodes on this machine, RF=3, acks=all.

    python -m bench.cluster_perf [--records 1000000] [--phases produce,e2e,failover]
    python -m bench.cluster_perf --phases txn [--txn-seconds 10] [--txn-records 100]

Starts a 3-node cluster (combined broker+controller nodes, `odradek cluster up`'s machinery:
odradek.broker.local_cluster) in a temp dir, creates a topic with 6 partitions and replication
factor 3 (min.insync.replicas=2), and measures with 100 B records and acks=all:

- produce: records/s of confluent-kafka (odradek.perf, the producer the other phases use) and
  of the columnar producer, with the CPU seconds of the three nodes summed (leader and
  followers) per GB produced;
- e2e: end-to-end p50/p99 at 50k records/s (confluent-kafka producer and consumer);
- propagation (not in the default phases): from CreateTopics' answer until every broker's
  Metadata names the new topic's leaders;
- txn (not in the default phases): one transactional confluent-kafka producer, transactions of
  `--txn-records` records spread round-robin over the 6 partitions, back to back for
  `--txn-seconds` or `--txn-count` transactions, whichever ends first; transactions/s,
  records/s, each transaction's wall time (begin_transaction to commit_transaction returned)
  and the commit_transaction() call (after an explicit flush, so mostly EndTxn). Twice: plain,
  then with send_offsets_to_transaction of a subscribed consumer's group metadata in each
  transaction (AddOffsetsToTxn + TxnOffsetCommit). A transaction begun right after the last
  commit returned can meet CONCURRENT_TRANSACTIONS (the last one's markers not all written
  yet): librdkafka retries AddPartitionsToTxn after 20 ms but AddOffsetsToTxn after
  retry.backoff.ms (100 ms), which shows in both lines; `--txn-x K=V` sets the producer's
  librdkafka settings;
- failover: kill -9 of a partition's leader while a producer sends to that partition one
  record at a time (`--failover-kill`: partition 0, or one led by the KRaft quorum leader, or
  one led by another node); the time from the kill to the first acknowledged produce on it,
  for each
  broker.session.timeout.ms in `--session-timeouts` (default 9000, Kafka's, and 3000). A fresh
  cluster per session timeout.

The load average is printed beside each figure (the machine is shared). `--profile DIR`
records py-spy of the nodes during the produce runs (what bounds them); `--write FILE` appends
the figures as markdown.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

from odradek.broker.admin_calls import call, cluster_state
from odradek.broker.local_cluster import LocalCluster

TOPIC = "cperf"
PARTITIONS = 6
BASE_SETTINGS = {
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "30000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "log.level": "WARN",
}


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def wait(cond: Any, what: str, timeout: float = 90.0, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = cond()
        except Exception as exc:  # nodes starting, leaders moving
            last, value = exc, None
        if value:
            return value
        time.sleep(every)
    raise RuntimeError(f"gave up waiting for {what} ({last})")


class Bench:
    def __init__(self, root: Path, session_ms: int,
                 node_set: dict[str, str] | None = None) -> None:
        self.session_ms = session_ms
        self.metadata_s = float("nan")  # the last failover: kill to Metadata naming the new leader
        self.local = LocalCluster.plan(root, 3, settings={
            **BASE_SETTINGS, "broker.session.timeout.ms": str(session_ms), **(node_set or {})})

    def start(self) -> Bench:
        self.local.start()

        def ready() -> bool:
            if self.local.dead():
                raise SystemExit(f"nodes exited: {[n.node_id for n in self.local.dead()]}")
            state = cluster_state(self.local.bootstrap, 5.0)
            unfenced = {b["id"] for b in state["brokers"] if not b["fenced"]}
            return state["quorum"].get("leader_id", -1) >= 0 and unfenced >= {1, 2, 3}

        try:
            wait(ready, "3 unfenced brokers")
        except BaseException:
            for n in self.local.nodes.values():
                print(f"--- node {n.node_id} log\n{n.log(3000)}", file=sys.stderr)
            self.local.kill_all()
            raise
        return self

    def stop(self) -> None:
        self.local.stop(30.0)

    def create_topic(self, topic: str) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.local.bootstrap})
        fut = admin.create_topics([NewTopic(topic, PARTITIONS, 3,
                                            config={"min.insync.replicas": "2"})],
                                  operation_timeout=30, request_timeout=30)
        fut[topic].result(30)

        def everywhere() -> bool:  # every broker's Metadata, not just the first one asked
            for node in self.local.brokers:
                parts = self.partitions(topic, node.bootstrap)
                if len(parts) != PARTITIONS or not all(
                        len(p["isr"]) == 3 and p["leader"] >= 0 for p in parts.values()):
                    return False
            return True

        wait(everywhere, f"{topic} fully replicated on every broker")

    def partitions(self, topic: str, bootstrap: str | None = None) -> dict[int, dict[str, Any]]:
        response = call(bootstrap or self.local.bootstrap, 3, 12, {
            "topics": [{"name": topic, "topic_id": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}, 5.0)
        out: dict[int, dict[str, Any]] = {}
        for t in response.topics:
            for p in t.partitions:
                out[int(p.partition_index)] = {"leader": int(p.leader_id),
                                               "isr": [int(r) for r in p.isr_nodes]}
        return out

    def procs(self) -> dict[int, psutil.Process]:
        return {n.node_id: psutil.Process(n.proc.pid) for n in self.local.nodes.values()
                if n.proc is not None and n.alive()}

    def topic_bytes(self, topic: str) -> dict[int, int]:
        """Bytes in each node's log segments of `topic`: shows the followers hold the data."""
        return {n.node_id: sum(f.stat().st_size for d in n.data_dir.glob(f"{topic}-*")
                               for f in d.glob("*.log"))
                for n in self.local.nodes.values()}

    def cpu(self) -> dict[int, float]:
        out = {}
        for nid, p in self.procs().items():
            t = p.cpu_times()
            out[nid] = t.user + t.system
        return out


@contextlib.contextmanager
def profiled(bench: Bench, out_dir: Path | None, label: str) -> Iterator[None]:
    """py-spy record of every node for the duration (the bounds of a run)."""
    spies: list[subprocess.Popen[bytes]] = []
    spy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}{os.pathsep}"
                                      f"{os.environ.get('PATH', '')}")
    if out_dir is not None and spy:
        out_dir.mkdir(parents=True, exist_ok=True)
        for nid, p in bench.procs().items():
            spies.append(subprocess.Popen(
                [spy, "record", "--pid", str(p.pid), "--rate", "50", "--format", "raw",
                 "--output", str(out_dir / f"{label}-node{nid}.txt"), "--nonblocking"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        yield
    finally:
        for s in spies:
            s.send_signal(2)
        for s in spies:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.wait(20)


def produce_phase(bench: Bench, args: argparse.Namespace, lines: list[str]) -> None:
    from odradek.perf.runs import run_producer, run_producer_columnar

    for client in args.clients.split(","):
        topic = f"{TOPIC}-{client}"
        bench.create_topic(topic)
        before = bench.cpu()
        with profiled(bench, args.profile, f"produce-{client}"):
            if client == "confluent":
                res = run_producer(bench.local.bootstrap, topic, args.records, 100, "all",
                                   None, out=None, max_seconds=args.max_seconds,
                                   processes=args.processes)
            else:
                res = run_producer_columnar(bench.local.bootstrap, topic, args.records, 100,
                                            "all", None, out=None,
                                            max_seconds=args.max_seconds)
        after = bench.cpu()
        per_node = {n: after[n] - before.get(n, 0.0) for n in after}
        gb = max(res.bytes / 1e9, 1e-12)
        line = (f"produce {client:9s} acks=all RF=3: {res.records_per_sec:,.0f} records/s "
                f"({res.records} acked, {res.errors} errors, {res.seconds:.1f} s); node CPU "
                f"{sum(per_node.values()) / gb:.0f} s/GB (per node s: "
                + ", ".join(f"{n}={c:.1f}" for n, c in sorted(per_node.items()))
                + "; MB in each node's log: "
                + ", ".join(f"{n}={b / 1e6:.0f}" for n, b in sorted(bench.topic_bytes(topic).items()))
                + f"); {load()}")
        print(line, flush=True)
        lines.append(line)


def e2e_phase(bench: Bench, args: argparse.Namespace, lines: list[str]) -> None:
    from odradek.perf.confluent import run_e2e

    topic = f"{TOPIC}-e2e"
    bench.create_topic(topic)
    res = run_e2e(bench.local.bootstrap, topic, args.e2e_rate, args.e2e_seconds, 100, "all",
                  out=None)
    line = (f"e2e confluent acks=all RF=3 at {args.e2e_rate:,.0f}/s target: "
            f"{res.records_per_sec:,.0f} records/s, p50 {res.pct(0.5):.1f} ms, "
            f"p99 {res.pct(0.99):.1f} ms; {load()}")
    print(line, flush=True)
    lines.append(line)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


def txn_run(bench: Bench, args: argparse.Namespace, topic: str, txn_id: str,
            offsets_from: Any = None, offsets_topic: str = "") -> dict[str, Any]:
    """Back-to-back transactions of args.txn_records records, round-robin over the partitions.
    With `offsets_from` (a consumer whose group has a generation) each transaction also sends
    offsets of `offsets_topic` with that consumer's group metadata."""
    from confluent_kafka import KafkaException, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bench.local.bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, "transaction.timeout.ms": 60000,
                         **dict(kv.split("=", 1) for kv in args.txn_x)})
    producer.init_transactions(60)
    payload = b"x" * 100
    walls: list[float] = []
    commits: list[float] = []
    sends: list[float] = []
    aborted = 0
    began = time.monotonic()
    deadline = began + args.txn_seconds
    while time.monotonic() < deadline and (not args.txn_count or len(walls) < args.txn_count):
        t0 = time.perf_counter()
        try:
            producer.begin_transaction()
            for i in range(args.txn_records):
                producer.produce(topic, payload, partition=i % PARTITIONS)
            if offsets_from is not None:
                offsets_from.poll(0)  # serves the consumer's callbacks; its topic is empty
                offset = len(walls) + 1
                s0 = time.perf_counter()
                producer.send_offsets_to_transaction(
                    [TopicPartition(offsets_topic, p, offset) for p in range(PARTITIONS)],
                    offsets_from.consumer_group_metadata(), 30)
                sends.append((time.perf_counter() - s0) * 1000)
            producer.flush(30)
            t1 = time.perf_counter()
            producer.commit_transaction(30)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(30)
            aborted += 1
            continue
        t2 = time.perf_counter()
        commits.append((t2 - t1) * 1000)
        walls.append((t2 - t0) * 1000)
    seconds = time.monotonic() - began
    producer.flush(10)
    return {"txns": len(walls), "aborted": aborted, "seconds": seconds, "walls": walls,
            "commits": commits, "sends": sends}


def txn_line(label: str, args: argparse.Namespace, res: dict[str, Any]) -> str:
    secs, walls, commits, sends = res["seconds"], res["walls"], res["commits"], res["sends"]
    return (f"txn {label} confluent {args.txn_records} x 100 B/txn over {PARTITIONS} partitions "
            f"RF=3: {res['txns'] / secs:,.1f} transactions/s, "
            f"{res['txns'] * args.txn_records / secs:,.0f} records/s ({res['txns']} committed, "
            f"{res['aborted']} aborted, {secs:.1f} s); transaction begin->committed p50 "
            f"{pct(walls, 0.5):.1f} ms, p95 {pct(walls, 0.95):.1f} ms, "
            f"p99 {pct(walls, 0.99):.1f} ms; commit_transaction() after flush p50 "
            f"{pct(commits, 0.5):.1f} ms, p95 {pct(commits, 0.95):.1f} ms, "
            f"p99 {pct(commits, 0.99):.1f} ms, max {max(commits, default=float('nan')):.1f} ms"
            + (f"; send_offsets_to_transaction() p50 {pct(sends, 0.5):.1f} ms, "
               f"p99 {pct(sends, 0.99):.1f} ms" if sends else "")
            + f"; {load()}")


def txn_phase(bench: Bench, args: argparse.Namespace, lines: list[str]) -> None:
    from confluent_kafka import Consumer

    from odradek.client import consumer_settings

    topic, source = f"{TOPIC}-txn", f"{TOPIC}-txn-in"
    bench.create_topic(topic)
    res = txn_run(bench, args, topic, "cperf-txn")
    line = txn_line("plain", args, res)
    print(line, flush=True)
    lines.append(line)

    # a group with a generation: a consumer subscribed to an empty topic, holding its
    # assignment while the producer commits offsets for it in each transaction
    bench.create_topic(source)
    consumer = Consumer(consumer_settings(bench.local.bootstrap, group_id=f"{TOPIC}-txn-group",
                                          auto_offset_reset="earliest",
                                          enable_auto_commit=False))
    try:
        consumer.subscribe([source])

        def assigned() -> bool:
            consumer.poll(0.1)
            return bool(consumer.assignment())

        wait(assigned, f"the {TOPIC}-txn-group consumer's assignment", 60, 0.0)
        res = txn_run(bench, args, topic, "cperf-txn-offsets", consumer, source)
    finally:
        consumer.close()
    line = txn_line("+send_offsets", args, res)
    print(line, flush=True)
    lines.append(line)


def pick_partition(bench: Bench, topic: str, kill: str) -> tuple[int, int, bool]:
    """(partition, its leader, the leader also leads the KRaft quorum) for the kill case:
    `quorum-leader` a partition the quorum leader leads, `other` one it does not, `any`
    partition 0. Combined nodes: when the killed leader also leads the quorum, a new quorum
    leader has to be elected before anyone can fence the dead broker."""
    parts = bench.partitions(topic)
    quorum_leader = cluster_state(bench.local.bootstrap, 5.0)["quorum"].get("leader_id")
    for index in sorted(parts):
        leader = parts[index]["leader"]
        if kill == "any" or (leader == quorum_leader) == (kill == "quorum-leader"):
            return index, leader, leader == quorum_leader
    raise RuntimeError(f"no partition of {topic} for the kill case {kill!r}: {parts}")


def propagation_phase(bench: Bench, args: argparse.Namespace, lines: list[str]) -> None:
    """How long after CreateTopics returns (Kafka's answers once the controller committed the
    records; brokers learn them from the metadata log) until every broker's Metadata names
    the topic with a leader for each partition: the window in which a client asking another
    broker meets UNKNOWN_TOPIC_OR_PARTITION (retriable; Kafka's clients retry it)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bench.local.bootstrap})
    waits: list[float] = []
    for i in range(args.propagation_topics):
        topic = f"{TOPIC}-prop-{i}"
        admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=30,
                            request_timeout=30)[topic].result(30)
        created = time.monotonic()
        pending = {n.node_id: n.bootstrap for n in bench.local.brokers}
        while pending and time.monotonic() < created + 30:
            for node_id, bootstrap in list(pending.items()):
                with contextlib.suppress(Exception):
                    parts = bench.partitions(topic, bootstrap)
                    if len(parts) == PARTITIONS and all(p["leader"] >= 0
                                                        for p in parts.values()):
                        del pending[node_id]
            time.sleep(0.005)
        waits.append(time.monotonic() - created)
    waits.sort()
    line = (f"metadata propagation: CreateTopics returned -> every broker's Metadata names the "
            f"topic: p50 {waits[len(waits) // 2] * 1000:.0f} ms, max {waits[-1] * 1000:.0f} ms "
            f"over {len(waits)} topics; {load()}")
    print(line, flush=True)
    lines.append(line)


def failover_once(bench: Bench, topic: str, extra: dict[str, str],
                  kill: str = "any") -> tuple[float, int, int, bool]:
    """Kill -9 a partition's leader (see pick_partition); seconds from the kill to the first
    acknowledged produce on that partition (a producer sending one record at a time,
    acks=all)."""
    from confluent_kafka import Producer

    index, leader, was_quorum_leader = pick_partition(bench, topic, kill)
    producer = Producer({"bootstrap.servers": bench.local.bootstrap, "acks": "all",
                         "linger.ms": 0, "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 60000,
                         "message.timeout.ms": 60000, "socket.timeout.ms": 1000, **extra})
    acked: list[float] = []
    failed: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is None:
            acked.append(time.monotonic())
        else:
            failed.append(str(err))

    producer.produce(topic, b"x" * 100, partition=index, on_delivery=report)
    producer.flush(10)
    assert acked, f"no ack before the kill: {failed}"
    acked.clear()
    node = bench.local.nodes[leader]
    seen: list[float] = []
    others = bench.local.bootstrap_without(leader)

    def watch() -> None:  # when a surviving broker's Metadata first names the new leader
        while not seen and time.monotonic() < t_kill + 120:
            with contextlib.suppress(Exception):
                if bench.partitions(topic, others)[index]["leader"] not in (leader, -1):
                    seen.append(time.monotonic())
            time.sleep(0.02)

    t_kill = time.monotonic()
    node.kill9()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    # keep one record in flight at a time: the first ack after the kill ends the measurement
    deadline = t_kill + 120
    while not acked and time.monotonic() < deadline:
        producer.produce(topic, b"y" * 100, partition=index, on_delivery=report)
        while not acked and not failed and time.monotonic() < deadline:
            producer.poll(0.005)
        failed.clear()
    producer.flush(5)
    watcher.join(10)
    bench.metadata_s = (seen[0] - t_kill) if seen else float("nan")
    new_leader = bench.partitions(topic, bench.local.bootstrap_without(leader))[index]["leader"]
    node.start()
    return (acked[0] - t_kill if acked else float("nan")), leader, new_leader, was_quorum_leader


def failover_phase(root: Path, args: argparse.Namespace, lines: list[str]) -> None:
    extra = dict(kv.split("=", 1) for kv in args.failover_x)
    kills = args.failover_kill.split(",")
    for session_ms in [int(s) for s in args.session_timeouts.split(",")]:
        bench = Bench(root / f"failover-{session_ms}", session_ms, args.node_set_dict).start()
        try:
            topic = f"{TOPIC}-failover"
            bench.create_topic(topic)
            for i in range(args.failover_rounds):
                kill = kills[i % len(kills)]
                secs, old, new, quorum = failover_once(bench, topic, extra, kill)
                line = (f"failover broker.session.timeout.ms={session_ms}"
                        f"{' producer ' + str(extra) if extra else ''}: {secs:.2f} s from "
                        f"kill -9 of leader {old} to the first acked produce on its partition "
                        f"(new leader {new}; the killed node "
                        f"{'was' if quorum else 'was not'} the KRaft quorum leader; Metadata "
                        f"named it after {bench.metadata_s:.2f} s; {secs - session_ms / 1000:+.2f} s beyond the "
                        f"session timeout); {load()}")
                print(line, flush=True)
                lines.append(line)
                if i + 1 < args.failover_rounds:
                    wait(lambda b=bench, t=topic: all(
                        len(p["isr"]) == 3 and p["leader"] >= 0
                        for p in b.partitions(t).values()), "every ISR back to 3", 120)
        finally:
            bench.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--max-seconds", type=float, default=30.0)
    parser.add_argument("--processes", type=int, default=1,
                        help="confluent-kafka producer processes")
    parser.add_argument("--clients", default="confluent,columnar")
    parser.add_argument("--phases", default="produce,e2e,failover")
    parser.add_argument("--e2e-rate", type=float, default=50_000)
    parser.add_argument("--e2e-seconds", type=float, default=5.0)
    parser.add_argument("--session-timeouts", default="9000,3000")
    parser.add_argument("--failover-rounds", type=int, default=1)
    parser.add_argument("--propagation-topics", type=int, default=20)
    parser.add_argument("--txn-records", type=int, default=100,
                        help="records (100 B) per transaction in the txn phase")
    parser.add_argument("--txn-seconds", type=float, default=10.0,
                        help="how long each txn run lasts (or --txn-count, what ends first)")
    parser.add_argument("--txn-count", type=int, default=0,
                        help="transactions per txn run (0: no limit but --txn-seconds)")
    parser.add_argument("--txn-x", action="append", default=[], metavar="KEY=VALUE",
                        help="A librdkafka setting of the transactional producer (repeatable)")
    parser.add_argument("--failover-kill", default="any",
                        help="Kill cases taken in turn each round, comma separated: any "
                             "(partition 0's leader), quorum-leader (a partition led by the "
                             "KRaft quorum leader), other (one led by another node)")
    parser.add_argument("--failover-x", action="append", default=[], metavar="KEY=VALUE",
                        help="A librdkafka setting of the failover producer (repeatable)")
    parser.add_argument("--node-set", action="append", default=[], metavar="KEY=VALUE",
                        help="A node setting for every node (repeatable)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="py-spy raw profiles of the nodes during produce, in this dir")
    parser.add_argument("--write", type=Path, default=None, help="Append the lines here.")
    parser.add_argument("--root", type=Path, default=None,
                        help="Keep the clusters' directories (node logs) here, not in a temp dir")
    parser.add_argument("--quick", action="store_true", help="200k records, 2 s e2e")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.e2e_seconds = 200_000, 2.0
    args.node_set_dict = dict(kv.split("=", 1) for kv in args.node_set)
    phases = set(args.phases.split(","))
    unknown = phases - {"produce", "e2e", "propagation", "failover", "txn"}
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}")
    lines: list[str] = [f"# cluster phase: 3 nodes, RF=3, {PARTITIONS} partitions, 100 B, "
                        f"acks=all; node settings {args.node_set_dict}; {load()}"]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="odradek-cluster-perf-") as tmp:
        root = args.root or Path(tmp)
        if phases & {"produce", "e2e", "propagation", "txn"}:
            bench = Bench(root / "throughput", 9000, args.node_set_dict).start()
            try:
                if "produce" in phases:
                    produce_phase(bench, args, lines)
                if "e2e" in phases:
                    e2e_phase(bench, args, lines)
                if "propagation" in phases:
                    propagation_phase(bench, args, lines)
                if "txn" in phases:
                    txn_phase(bench, args, lines)
            finally:
                bench.stop()
        if "failover" in phases:
            failover_phase(root, args, lines)
    if args.write is not None:
        with args.write.open("a") as f:
            f.write("\n".join(f"- {line}" for line in lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
