"""Connect's three topics over the Kafka protocol (KafkaBasedLog's job): one reader thread
applies every record of connect-configs, connect-status and connect-offsets to the views in
`state`, and writes return once acknowledged (acks=all, idempotent) and read back.

The topics are created when missing, compacted, with Kafka's partition counts; an existing
config topic with more than one partition, or any of them not compacted, is refused as
Kafka's worker refuses it (their records would be reordered or lost).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from odradek.connect import records
from odradek.connect.cluster import Cluster
from odradek.connect.errors import ConnectError
from odradek.connect.state import ConfigState, OffsetState, StatusState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Topics:
    config: str = records.CONFIG_TOPIC
    offset: str = records.OFFSET_TOPIC
    status: str = records.STATUS_TOPIC
    offset_partitions: int = records.OFFSET_PARTITIONS
    status_partitions: int = records.STATUS_PARTITIONS
    replication_factor: int = -1  # -1: the broker's default (min of 3 and the live brokers)


class StoreError(Exception):
    """A topic that cannot hold Connect's state; the worker refuses to start."""


class ConnectStore:
    def __init__(self, cluster: Cluster, topics: Topics = Topics(), timeout: float = 30.0,
                 on_config: Callable[[], None] | None = None) -> None:
        self.cluster = cluster
        self.topics = topics
        self.timeout = timeout
        self.on_config = on_config
        self.configs = ConfigState()
        self.status = StatusState()
        self.offsets = OffsetState()
        self.lock = threading.Condition()
        self.positions: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._consumer: Any = None
        self._watermarks: Any = None
        self._wm_lock = threading.Lock()
        self._partitions: list[tuple[str, int]] = []
        self.cluster_id = ""

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._ensure_topics()
        # murmur2_random is the Java client's partitioner: an offset key lands on the same
        # connect-offsets partition a Java worker would put it on.
        self._producer = self.cluster.producer({
            "acks": "all", "enable.idempotence": True, "linger.ms": 0,
            "partitioner": "murmur2_random"})
        self._consumer = self.cluster.consumer({"enable.partition.eof": False})
        self._watermarks = self.cluster.consumer()
        self._consumer.assign([TopicPartition(t, p, OFFSET_BEGINNING)
                               for t, p in self._partitions])
        self._thread = threading.Thread(target=self._read_loop, name="connect-store",
                                        daemon=True)
        self._thread.start()
        self.read_to_end()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
            self._watermarks.close()
        if self._producer is not None:
            self._producer.flush(5)

    def _ensure_topics(self) -> None:
        from confluent_kafka.admin import ConfigResource, NewTopic

        admin = self.cluster.admin()
        meta = admin.list_topics(timeout=self.timeout)
        self.cluster_id = str(getattr(meta, "cluster_id", "") or "")
        wanted = {self.topics.config: (1, "config.storage.topic"),
                  self.topics.offset: (self.topics.offset_partitions, "offset.storage.topic"),
                  self.topics.status: (self.topics.status_partitions, "status.storage.topic")}
        missing = [NewTopic(name, num_partitions=parts,
                            replication_factor=self.topics.replication_factor,
                            config={"cleanup.policy": "compact"})
                   for name, (parts, _) in wanted.items() if name not in meta.topics]
        if missing:
            for name, future in admin.create_topics(missing,
                                                    operation_timeout=self.timeout).items():
                try:
                    future.result(timeout=self.timeout)
                except Exception as exc:  # another worker created it first: fine
                    if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                        raise StoreError(f"cannot create {name}: {exc}") from exc
            meta = admin.list_topics(timeout=self.timeout)
        resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in wanted]
        described = admin.describe_configs(resources, request_timeout=self.timeout)
        self._partitions = []
        for name, (_, setting) in wanted.items():
            count = len(meta.topics[name].partitions)
            if name == self.topics.config and count != 1:
                raise StoreError(
                    f"Topic '{name}' supplied via the '{setting}' property is required to have a "
                    f"single partition in order to guarantee consistency of connector "
                    f"configurations, but found {count} partitions.")
            entries = next(f for r, f in described.items() if r.name == name).result(
                timeout=self.timeout)
            policy = entries["cleanup.policy"].value if "cleanup.policy" in entries else ""
            if "compact" not in str(policy).split(","):
                raise StoreError(
                    f"Topic '{name}' supplied via the '{setting}' property is required to have "
                    f"'cleanup.policy=compact' to guarantee consistency and durability of "
                    f"Connect's state, but found '{policy}'.")
            self._partitions += [(name, p) for p in range(count)]

    # ---- reading ----------------------------------------------------------------------------
    def _read_loop(self) -> None:
        while not self._stop.is_set():
            msgs = self._consumer.consume(500, 0.2)
            config_changed = False
            with self.lock:
                for msg in msgs:
                    if msg.error():
                        log.warning("reading Connect's topics: %s", msg.error())
                        continue
                    try:
                        self._apply(msg.topic(), msg.key(), msg.value())
                    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
                        # A record of a shape we do not know is skipped, not fatal.
                        log.warning("skipping %s-%d offset %d: %r", msg.topic(),
                                    msg.partition(), msg.offset(), exc)
                    config_changed |= msg.topic() == self.topics.config
                    self.positions[(msg.topic(), msg.partition())] = msg.offset() + 1
                if msgs:
                    self.lock.notify_all()
            if config_changed and self.on_config is not None:
                self.on_config()

    def _apply(self, topic: str, key: bytes | None, raw: bytes | None) -> None:
        if key is None:
            return
        value = records.loads(raw)
        if value is not None and not isinstance(value, dict):
            raise ValueError("a value must be a JSON object")
        if topic == self.topics.config:
            self.configs.apply(key.decode(), value)
        elif topic == self.topics.status:
            self.status.apply(key.decode(), value)
        elif topic == self.topics.offset:
            self.offsets.apply(key, value)

    def read_to_end(self) -> None:
        """Block until every record in the three topics now has been applied."""
        from confluent_kafka import TopicPartition

        ends = {}
        with self._wm_lock:
            for topic, part in self._partitions:
                _, end = self._watermarks.get_watermark_offsets(TopicPartition(topic, part),
                                                                timeout=self.timeout)
                ends[(topic, part)] = int(end)
        self._wait(ends)

    def _wait(self, ends: dict[tuple[str, int], int]) -> None:
        def done() -> bool:
            return all(end <= 0 or self.positions.get(tp, 0) >= end for tp, end in ends.items())

        with self.lock:
            if not self.lock.wait_for(done, timeout=self.timeout):
                raise ConnectError(500, "timed out reading Connect's topics to their end")

    # ---- writing ----------------------------------------------------------------------------
    def write(self, topic: str, items: list[tuple[bytes, dict[str, Any] | None]],
              wait: bool = True) -> None:
        """Append (key, value) records in order; return once acknowledged and, with `wait`,
        applied to the views (read-your-writes)."""
        if not items:
            return
        results: list[tuple[Any, Any]] = []

        def delivered(err: Any, msg: Any) -> None:
            results.append((err, msg))

        for key, value in items:
            raw = None if value is None else records.dumps(value)
            self._producer.produce(topic, key=key, value=raw, on_delivery=delivered)
        left = self._producer.flush(self.timeout)
        if left or len(results) != len(items):
            raise ConnectError(500, f"timed out writing to {topic}")
        failed = [err for err, _ in results if err is not None]
        if failed:
            raise ConnectError(500, f"Error writing to {topic}: {failed[0]}")
        if wait:
            ends: dict[tuple[str, int], int] = {}
            for _, msg in results:
                tp = (msg.topic(), msg.partition())
                ends[tp] = max(ends.get(tp, 0), msg.offset() + 1)
            self._wait(ends)

    def write_config(self, items: list[tuple[str, dict[str, Any] | None]]) -> None:
        self.write(self.topics.config, [(k.encode(), v) for k, v in items])

    def write_status(self, key: str, value: dict[str, Any] | None, wait: bool = False) -> None:
        self.write(self.topics.status, [(key.encode(), value)], wait=wait)

    def write_offsets(self, connector: str,
                      items: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
        self.write(self.topics.offset,
                   [(records.offset_key(connector, part), off) for part, off in items])

    # ---- snapshots --------------------------------------------------------------------------
    def snapshot_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        with self.lock:
            return [(json.loads(json.dumps(p)), dict(o))
                    for p, o in self.offsets.of(connector)]
