"""W3: topic, partition and config churn against the metadata quorum.

Each worker walks its own topics (names unique per worker and round) through a life:
create -> see it -> set retention.ms -> read it back -> add partitions -> see them ->
delete -> see it gone. After each acknowledged change it describes the topic until the change
shows (or WAIT seconds pass), recording every describe, so the checker (`checker/metadata.py`)
can say whether what the quorum acknowledged was seen and never went back.

Ops, each naming `value["topic"]`:
  create-topic {"topic", "partitions"}            delete-topic {"topic"}
  create-partitions {"topic", "count"}            alter-config {"topic", "config": {k: v}}
  describe-topic {"topic"} -> {"topic", "exists", "partitions", "config": {"retention.ms": v}}
A change that fails with a definite Kafka error is "fail"; a timeout, a lost connection or a
retriable error is "info" (the controller may still have applied it).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from ..env import Env
from ..history import History, Op
from .common import ADMIN_TIMEOUT, Workers, client_config, thread_rng

WAIT = 60.0
RETENTIONS = ["3600000", "7200000", "86400000", "604800000"]
UNKNOWN = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_CONTROLLER,
    KafkaError._MSG_TIMED_OUT,
}


class W3:
    name = "w3"
    workers = 2

    def __init__(self, env: Env, history: History, rng: random.Random) -> None:
        self.env, self.history, self.rng = env, history, rng
        self.tag = f"{rng.getrandbits(32):08x}"

    def run(self, stop: threading.Event) -> None:
        w = Workers(self.history)
        for i in range(self.workers):
            rng = thread_rng(self.rng)
            w.start(f"w3-worker-{i}", lambda i=i, r=rng: self._worker(i, r, stop))
        stop.wait()
        w.join(WAIT * 2 + 60)

    def final_reads(self) -> bool:
        return True

    def _admin(self) -> AdminClient:
        return AdminClient(client_config(self.env, {}, admin=True))

    def _worker(self, i: int, rng: random.Random, stop: threading.Event) -> None:
        admin = self._admin()
        process = self.history.new_process()
        # RF 2 (of 3 nodes): Kafka refuses a topic with more replicas than live brokers
        # (INVALID_REPLICATION_FACTOR), so the churn goes on with one node down
        rf = min(2, self.env.replication_factor)
        n = 0
        while not stop.is_set():
            n += 1
            topic = f"w3-{self.tag}-{i}-{n}"
            steps: list[tuple[str, dict[str, Any], Callable[[AdminClient], Any]]] = [
                (
                    "create-topic",
                    {"topic": topic, "partitions": 1},
                    lambda a, t=topic: a.create_topics(
                        [NewTopic(t, 1, rf, config={"min.insync.replicas": "1"})],
                        operation_timeout=ADMIN_TIMEOUT,
                    )[t],
                ),
            ]
            retention = rng.choice(RETENTIONS)
            steps.append(
                (
                    "alter-config",
                    {"topic": topic, "config": {"retention.ms": retention}},
                    lambda a, t=topic, r=retention: a.incremental_alter_configs(
                        [
                            ConfigResource(
                                "topic",
                                t,
                                incremental_configs=[
                                    ConfigEntry(
                                        "retention.ms",
                                        r,
                                        incremental_operation=AlterConfigOpType.SET,
                                    )
                                ],
                            )
                        ]
                    )[ConfigResource("topic", t)],
                )
            )
            count = rng.randint(2, 3)
            steps.append(
                (
                    "create-partitions",
                    {"topic": topic, "count": count},
                    lambda a, t=topic, c=count: a.create_partitions(
                        [NewPartitions(t, c)], operation_timeout=ADMIN_TIMEOUT
                    )[t],
                )
            )
            steps.append(
                (
                    "delete-topic",
                    {"topic": topic},
                    lambda a, t=topic: a.delete_topics([t], operation_timeout=ADMIN_TIMEOUT)[t],
                )
            )
            for f, value, call in steps:
                if stop.is_set() and f != "delete-topic":
                    continue  # on stop, only clean up
                op = self.history.invoke(process, f, value)
                outcome = self._mutate(op, lambda c=call, a=admin: c(a))
                if outcome == "info":
                    # the admin client sends to the controller Metadata named; when that node
                    # died, librdkafka reconnects to it in a tight loop (a CPU-eating spin
                    # that starves the nodes): drop the client, take fresh metadata
                    admin = self._admin()
                    stop.wait(1.0)
                if outcome == "ok":
                    self._await(admin, process, op)
                elif f == "create-topic" and outcome == "fail":
                    stop.wait(1.0)  # refused outright: do not hammer the controller
                    break

    def _mutate(self, op: Op, call: Callable[[], Any]) -> str:
        try:
            call().result(ADMIN_TIMEOUT + 10)
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is not None and not err.retriable() and err.code() not in UNKNOWN:
                self.history.fail(op, error=str(err.name()))
                return "fail"
            self.history.info(op, error=str(err.name()) if err is not None else str(exc))
            return "info"
        except Exception as exc:  # a future that timed out, a broken admin connection
            self.history.info(op, error=type(exc).__name__)
            return "info"
        self.history.ok(op, op.value)
        return "ok"

    def _await(self, admin: AdminClient, process: int, op: Op) -> None:
        """Describe the topic until the acknowledged change shows, or WAIT passes."""
        topic = op.value["topic"]
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            d = self._describe(admin, process, topic)
            if d is not None and _shows(op, d):
                return
            time.sleep(0.2)

    def _describe(self, admin: AdminClient, process: int, topic: str) -> dict[str, Any] | None:
        op = self.history.invoke(process, "describe-topic", {"topic": topic})
        try:
            md = admin.list_topics(timeout=10)
            t = md.topics.get(topic)
            exists = t is not None and t.error is None
            out: dict[str, Any] = {
                "topic": topic,
                "exists": exists,
                "partitions": len(t.partitions) if exists and t else None,
                "config": None,
            }
            if exists:
                res = ConfigResource("topic", topic)
                entries = admin.describe_configs([res])[res].result(ADMIN_TIMEOUT)
                out["config"] = {"retention.ms": entries["retention.ms"].value}
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if err is not None and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                # listed a moment ago, gone when its configs were asked for: a delete racing
                out = {"topic": topic, "exists": False, "partitions": None, "config": None}
            else:
                self.history.fail(op, error=str(err.name()) if err is not None else str(exc))
                return None
        except Exception as exc:
            self.history.fail(op, error=type(exc).__name__)
            return None
        self.history.ok(op, out)
        return out


def _shows(op: Op, d: dict[str, Any]) -> bool:
    v = op.value
    if op.f == "create-topic":
        return bool(d["exists"])
    if op.f == "delete-topic":
        return not d["exists"]
    if op.f == "create-partitions":
        return bool(d["exists"]) and int(d["partitions"] or 0) >= int(v["count"])
    if op.f == "alter-config":
        return (
            bool(d["exists"])
            and (d["config"] or {}).get("retention.ms") == v["config"]["retention.ms"]
        )
    return True
