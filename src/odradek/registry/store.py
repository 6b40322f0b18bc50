"""`_schemas` over the Kafka protocol: a reader thread that applies every record to the view,
and writes that return only once the record is acknowledged (acks=all, idempotent producer)
and the reader has applied it (read-your-writes)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from odradek.registry import errors, records
from odradek.registry.state import Record, RegistryState

log = logging.getLogger(__name__)


class StoreUnreachable(RuntimeError):
    """The cluster refused the registry's credentials or TLS, or never answered."""


class KafkaStore:
    def __init__(self, bootstrap: str, topic: str = records.TOPIC, timeout: float = 30.0,
                 client: Mapping[str, object] | None = None) -> None:
        self.bootstrap = bootstrap
        # librdkafka settings (TLS, SASL) for every client of the store: Confluent's
        # kafkastore.security.protocol, kafkastore.sasl.* ... once translated
        self.client: dict[str, object] = dict(client or {})
        self.topic = topic
        self.timeout = timeout
        self.state = RegistryState()
        # Held while the reader applies a record and while a request reads the view.
        self.lock = threading.Condition()
        self.position = 0  # next offset the reader will apply
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Any = None
        self._consumer: Any = None
        self._offsets: Any = None

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        from odradek.client import consumer, producer

        self._ensure_topic()
        self._producer = producer(self.bootstrap, {
            **self.client, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._consumer = consumer(self.bootstrap, {**self.client, "enable.partition.eof": False})
        # Watermark queries get their own handle: on the polling consumer they were seen to
        # block while the reader thread polls.
        self._offsets = consumer(self.bootstrap, self.client)
        self._offsets_lock = threading.Lock()
        end = self.end_offset()
        # From the log start: compaction may have removed offset 0.
        self._consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._read_loop, name="registry-reader",
                                        daemon=True)
        self._thread.start()
        # Serve nothing until the view holds everything the topic held when we started.
        self.wait_for(end)
        log.info("read %s to offset %d: %d subjects, %d schemas", self.topic, end,
                 len(self.state.subjects), len(self.state.schemas))

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
            self._offsets.close()
        if self._producer is not None:
            self._producer.flush(5)

    def _ensure_topic(self) -> None:
        from confluent_kafka import KafkaError
        from confluent_kafka.admin import NewTopic

        from odradek.client import admin_client

        refused: list[Any] = []

        def on_error(err: Any) -> None:
            if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
                refused.append(err)

        admin = admin_client(self.bootstrap, {**self.client, "error_cb": on_error})
        meta = self._first_metadata(admin, refused)
        if self.topic in meta.topics:
            return
        replicas = min(3, max(1, len(meta.brokers)))
        new = NewTopic(self.topic, num_partitions=1, replication_factor=replicas,
                       config={"cleanup.policy": "compact"})
        future = admin.create_topics([new], operation_timeout=self.timeout)[self.topic]
        try:
            future.result(timeout=self.timeout)
        except Exception as exc:  # a racing registry created it first: fine
            err = exc.args[0] if exc.args else None
            if getattr(err, "code", lambda: None)() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise

    def _first_metadata(self, admin: Any, refused: list[Any]) -> Any:
        """list_topics in short waits: refused credentials or TLS end the start at once with
        librdkafka's own words (a registry that cannot log in must say so, not time out)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return admin.list_topics(timeout=1.0)
            except KafkaException as exc:
                admin.poll(0)
                if refused:
                    raise StoreUnreachable(f"the cluster at {self.bootstrap} refused the "
                                           f"registry's connection: {refused[0].str()}") from None
                if time.monotonic() >= deadline:
                    raise StoreUnreachable(f"no answer from the cluster at {self.bootstrap} "
                                           f"within {self.timeout:g}s: {exc}") from None

    # ---- reading ----------------------------------------------------------------------------
    def _read_loop(self) -> None:
        while not self._stop.is_set():
            msg = self._consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                log.warning("reading %s: %s", self.topic, msg.error())
                continue
            try:
                key = records.decode(msg.key())
                value = records.decode(msg.value())
            except (ValueError, UnicodeDecodeError):
                key = value = None
            with self.lock:
                if key is not None:
                    try:
                        self.state.apply(key, value)
                    except (KeyError, TypeError, ValueError) as exc:
                        # A record of a shape we do not know is skipped, not fatal.
                        log.warning("skipping %s offset %d: %r", self.topic, msg.offset(), exc)
                self.position = msg.offset() + 1
                self.lock.notify_all()

    def end_offset(self) -> int:
        from confluent_kafka import TopicPartition

        with self._offsets_lock:
            _, end = self._offsets.get_watermark_offsets(TopicPartition(self.topic, 0),
                                                         timeout=self.timeout)
        return int(end)

    def catch_up(self) -> None:
        """Apply everything in the topic now (another instance may have written last)."""
        self.wait_for(self.end_offset())

    def wait_for(self, offset: int) -> None:
        """Block until the view has applied every record before `offset`."""
        with self.lock:
            if not self.lock.wait_for(lambda: self.position >= offset, timeout=self.timeout):
                raise errors.RegistryError(
                    errors.OPERATION_TIMEOUT,
                    f"timed out reading {self.topic} to offset {offset}", status=500)

    # ---- writing ----------------------------------------------------------------------------
    def write(self, recs: list[Record]) -> None:
        """Append `recs`, in order; return once they are acknowledged and applied."""
        if not recs:
            return
        results: list[Any] = []

        def delivered(err: Any, msg: Any) -> None:
            results.append((err, msg))

        for key, value in recs:
            self._producer.produce(self.topic, key=json.dumps(key, separators=(",", ":")),
                                   value=records.encode(value), partition=0,
                                   on_delivery=delivered)
        remaining = self._producer.flush(self.timeout)
        if remaining or len(results) != len(recs):
            raise errors.RegistryError(errors.OPERATION_TIMEOUT,
                                       f"timed out writing to {self.topic}", status=500)
        failed = [err for err, _ in results if err is not None]
        if failed:
            raise errors.RegistryError(errors.STORE_ERROR,
                                       f"Error while writing to {self.topic}: {failed[0]}",
                                       status=500)
        self.wait_for(max(msg.offset() for _, msg in results) + 1)
