"""Driver-side look-ups: which partitions a subscription covers and where their offsets are.

Everything here runs in Spark's planning process, never in a task, and talks to the cluster
through confluent-kafka's AdminClient (ListOffsets with the query's isolation level, so the
latest offset under read_committed is the last stable offset).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from odradek.spark.options import EARLIEST, LATEST, OptionError, Subscription
from odradek.spark.options import OffsetSpec as StartSpec

TP = tuple[str, int]
LOG = logging.getLogger("odradek.spark")
# Settings only a consumer understands; an admin client would log a warning for each.
_CONSUMER_ONLY = ("isolation.level", "fetch.", "max.partition.fetch.bytes", "queued.",
                  "enable.partition.eof", "check.crcs", "session.timeout.ms",
                  "heartbeat.interval.ms", "max.poll.interval.ms", "auto.commit", "partition.assignment")


# Errors a partition shows between its creation and its leader being ready.
_TRANSIENT = {KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.LEADER_NOT_AVAILABLE,
              KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError._UNKNOWN_PARTITION,
              KafkaError._UNKNOWN_TOPIC}
_ATTEMPTS = 5


class DataLossError(RuntimeError):
    """Records a query still had to read are gone (retention, DeleteRecords, topic recreated)."""


class TopicAuthorizationError(RuntimeError):
    """A query names topics its principal may not describe or read: it fails, naming them, as
    Spark's Kafka source fails with the Java client's TopicAuthorizationException, rather than
    reading nothing (Metadata hides such a topic exactly as if it did not exist)."""

    def __init__(self, topics: Iterable[str]) -> None:
        self.topics = sorted(set(topics))
        super().__init__("TopicAuthorizationException: Not authorized to access topics: "
                         f"[{', '.join(self.topics)}]")


def isolation(client: Mapping[str, str]) -> str:
    return client.get("isolation.level", "read_committed")


class Planner:
    def __init__(self, client: Mapping[str, str], timeout_s: float = 30.0) -> None:
        conf: dict[str, object] = {k: v for k, v in client.items()
                                   if not k.startswith(_CONSUMER_ONLY)}
        conf["logger"] = LOG
        # librdkafka reports refused credentials or a failed TLS handshake only through
        # error_cb; without it a wrong password looks like a 30 s transport timeout
        self._refused: KafkaError | None = None
        conf["error_cb"] = self._on_error
        self._admin = AdminClient(conf)
        self._timeout = timeout_s
        self._isolation = (IsolationLevel.READ_UNCOMMITTED
                           if isolation(client) == "read_uncommitted" else IsolationLevel.READ_COMMITTED)

    def partitions(self, sub: Subscription) -> list[TP]:
        """The partitions the subscription reads now, sorted; an assign is taken as given."""
        if sub.kind == "assign":
            return list(sub.assigned)
        meta = self._metadata()
        out: list[TP] = []
        for name, topic in meta.topics.items():
            if topic.error is not None or name.startswith("__") or not sub.matches(name):
                continue
            out.extend((name, p) for p in topic.partitions)
        if sub.kind == "subscribe":
            # A topic named outright but missing from the listing: absent, or hidden from us.
            # A pattern is different: Java's consumer too matches only what it may see.
            self.check_authorized(t for t in sub.topics if t not in meta.topics
                                  or meta.topics[t].error is not None)
        return sorted(out)

    def check_authorized(self, topics: Iterable[str]) -> None:
        """Ask Metadata for each topic by name: TOPIC_AUTHORIZATION_FAILED (Kafka's answer to a
        principal without Describe, whether or not the topic exists) fails the query."""
        denied = []
        for name in dict.fromkeys(topics):
            try:
                meta = self._admin.list_topics(topic=name, timeout=self._timeout)
            except KafkaException:
                continue  # unreachable now: the next look-up reports it
            found = meta.topics.get(name)
            err = found.error if found is not None else None
            if err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                denied.append(name)
        if denied:
            raise TopicAuthorizationError(denied)

    def _on_error(self, err: KafkaError) -> None:
        if err.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL):
            self._refused = err

    def _metadata(self) -> ClusterMetadata:
        """list_topics in short waits, serving error_cb between them, so refused credentials
        fail the query at once with librdkafka's own message rather than a timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return self._admin.list_topics(timeout=min(1.0, self._timeout))
            except KafkaException:
                self._admin.poll(0)
                if self._refused is not None:
                    raise KafkaException(self._refused) from None
                if time.monotonic() >= deadline:
                    raise

    def _list(self, specs: Mapping[TP, OffsetSpec], *, skip_unready: bool = False) -> dict[TP, int]:
        """ListOffsets; a partition whose leader is not ready yet (a topic just created) is
        retried a few times, then dropped when `skip_unready`, else an error."""
        out: dict[TP, int] = {}
        pending = dict(specs)
        for attempt in range(_ATTEMPTS):
            if not pending:
                break
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): spec for (t, p), spec in pending.items()},
                isolation_level=self._isolation, request_timeout=self._timeout)
            failed: dict[TP, str] = {}
            for tp, fut in futures.items():
                key = (tp.topic, tp.partition)
                try:
                    out[key] = int(fut.result().offset)
                    pending.pop(key)
                except KafkaException as exc:
                    err = exc.args[0]
                    if err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                        raise TopicAuthorizationError([tp.topic]) from None
                    if err.code() not in _TRANSIENT:
                        # librdkafka says _NOENT "no leaders found" for a topic hidden from
                        # us: name the denial when that is what it is
                        self.check_authorized([tp.topic])
                        raise RuntimeError(f"listing offsets of {tp.topic}-{tp.partition} failed: "
                                           f"{err}") from None
                    failed[key] = str(err)
            if failed and attempt + 1 < _ATTEMPTS:
                time.sleep(0.2 * (attempt + 1))
            elif failed and not skip_unready:
                # an assigned topic we may not describe looks unknown to the listing: say so
                self.check_authorized(t for t, _ in failed)
                (t, p), why = next(iter(failed.items()))
                raise RuntimeError(f"listing offsets of {t}-{p} failed: {why}")
        return out

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list({tp: OffsetSpec.earliest() for tp in tps})

    def latest(self, tps: Iterable[TP], *, skip_unready: bool = False) -> dict[TP, int]:
        return self._list({tp: OffsetSpec.latest() for tp in tps}, skip_unready=skip_unready)

    def for_times(self, times: Mapping[TP, int]) -> dict[TP, int]:
        """The first offset whose timestamp is >= the given one; -1 when there is none."""
        return self._list({tp: OffsetSpec.for_timestamp(ts) for tp, ts in times.items()})

    def resolve(self, spec: StartSpec, tps: list[TP], *, ending: bool) -> dict[TP, int]:
        """Concrete offsets for `tps` under a starting or ending spec."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "offsets":
            given = _check_covers(spec, tps)
            early = self.earliest([tp for tp in tps if given[tp] == EARLIEST])
            late = self.latest([tp for tp in tps if given[tp] == LATEST])
            return {tp: early.get(tp, late.get(tp, given[tp])) for tp in tps}
        times = ({tp: spec.timestamp for tp in tps} if spec.kind == "timestamp"
                 else _check_covers(spec, tps))
        found = self.for_times(times)
        missing = [tp for tp in tps if found[tp] < 0]
        if missing and not ending:
            # Spark's default (startingOffsetsByTimestampStrategy=error): no record at or after
            # the timestamp is an error, not a silent jump to the end.
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise OptionError(f"option '{spec.option}': no record at or after the timestamp in {names}")
        late = self.latest(missing)
        return {tp: (found[tp] if found[tp] >= 0 else late[tp]) for tp in tps}


def _check_covers(spec: StartSpec, tps: list[TP]) -> dict[TP, int]:
    given = spec.as_map()
    missing = [tp for tp in tps if tp not in given]
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise OptionError(f"option '{spec.option}' must give every partition read; missing {names}")
    return given
