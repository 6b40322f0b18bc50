"""The console's view of the cluster through Kafka's admin API (confluent-kafka): brokers and
partition health, topics with their offsets and configs, and the actions on them.

Blocking calls, made from worker threads by the API. A Kafka error becomes `KafkaFailure`
with Kafka's error name and the broker's message (`TOPIC_ALREADY_EXISTS: Topic 'x' already
exists.`), which the API answers with a 4xx the page shows.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from odradek.client import client_config
from odradek.console.paging import Page, paginate

TIMEOUT_S = 15.0
METADATA_TTL_S = 2.0


class KafkaFailure(Exception):
    """A Kafka error from an admin call: `status` is the HTTP status the API answers."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def error_text(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        text = err.str() or ""
        return f"{err.name()}: {text}" if text and text != err.name() else err.name()
    return str(exc) or type(exc).__name__


def result(future: Any, timeout: float = TIMEOUT_S) -> Any:
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        raise KafkaFailure(error_text(exc)) from None
    except TimeoutError:
        raise KafkaFailure("the cluster did not answer in time", 504) from None


def _source_name(source: Any) -> str:
    # confluent-kafka hands the source as ConfigSource's int value
    try:
        return ConfigSource(int(getattr(source, "value", source))).name
    except (ValueError, TypeError):
        return str(source)


class Cluster:
    def __init__(self, bootstrap: str, overrides: dict[str, object] | None = None) -> None:
        self.bootstrap = bootstrap
        self.overrides = dict(overrides or {})
        self.admin = AdminClient(client_config(bootstrap, self.overrides))
        self._meta: Any = None
        self._meta_at = 0.0
        self._lock = threading.Lock()
        # topic -> (monotonic time, sum of end offsets): message rates between two looks
        self._ends_seen: dict[str, tuple[float, int]] = {}

    # ---- metadata ---------------------------------------------------------------------
    def metadata(self, fresh: bool = False) -> Any:
        with self._lock:
            if fresh or self._meta is None or time.monotonic() - self._meta_at > METADATA_TTL_S:
                try:
                    self._meta = self.admin.list_topics(timeout=TIMEOUT_S)
                except KafkaException as exc:
                    raise KafkaFailure(error_text(exc), 503) from None
                self._meta_at = time.monotonic()
            return self._meta

    def topic_names(self, internal: bool = False) -> list[str]:
        names = sorted(self.metadata().topics)
        return names if internal else [n for n in names if not n.startswith("__")]

    def _topic(self, name: str) -> Any:
        t = self.metadata().topics.get(name)
        if t is None:
            t = self.metadata(fresh=True).topics.get(name)
        if t is None or (t.error is not None and t.error.code() ==
                         KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise KafkaFailure(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name!r} does not exist", 404)
        return t

    def offsets(self, tps: Iterable[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
        wanted = {TopicPartition(t, p): spec for t, p in tps}
        if not wanted:
            return {}
        futures = self.admin.list_offsets(wanted, request_timeout=TIMEOUT_S)
        out = {}
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = result(fut).offset
            except KafkaFailure:
                out[(tp.topic, tp.partition)] = -1  # offline partition: shown as unknown
        return out

    # ---- overview ---------------------------------------------------------------------
    def overview(self) -> dict[str, Any]:
        desc = result(self.admin.describe_cluster(request_timeout=TIMEOUT_S))
        meta = self.metadata(fresh=True)
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        offline = urp = total = 0
        for t in meta.topics.values():
            for p in t.partitions.values():
                total += 1
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                for r in p.replicas:
                    replicas[r] = replicas.get(r, 0) + 1
                if p.leader < 0:
                    offline += 1
                elif len(p.isrs) < len(p.replicas):
                    urp += 1
        controller = desc.controller.id if desc.controller else None
        brokers = [{"id": n.id, "host": n.host, "port": n.port, "rack": n.rack,
                    "leaders": leaders.get(n.id, 0), "replicas": replicas.get(n.id, 0),
                    "controller": n.id == controller}
                   for n in sorted(desc.nodes, key=lambda n: n.id)]
        return {"cluster_id": desc.cluster_id, "controller": controller, "brokers": brokers,
                "topics": len(meta.topics), "partitions": total, "offline": offline,
                "under_replicated": urp}

    # ---- topics -----------------------------------------------------------------------
    def topics_page(self, query: str, page: int, size: int, internal: bool) -> dict[str, Any]:
        found: Page[str] = paginate(self.topic_names(internal), query, page, size)
        meta = self.metadata()
        tps = [(n, p) for n in found.items for p in meta.topics[n].partitions]
        ends = self.offsets(tps, OffsetSpec.latest())
        starts = self.offsets(tps, OffsetSpec.earliest())
        now = time.monotonic()
        rows = []
        for name in found.items:
            t = meta.topics[name]
            parts = t.partitions
            end_sum = sum(max(ends.get((name, p), 0), 0) for p in parts)
            msgs = sum(max(ends.get((name, p), 0) - starts.get((name, p), 0), 0) for p in parts)
            rate = None
            seen = self._ends_seen.get(name)
            if seen is not None and now - seen[0] > 0.5:
                rate = max(0.0, (end_sum - seen[1]) / (now - seen[0]))
            if seen is None or now - seen[0] > 0.5:
                self._ends_seen[name] = (now, end_sum)
            rf = max((len(p.replicas) for p in parts.values()), default=0)
            urp = sum(1 for p in parts.values() if p.leader < 0 or len(p.isrs) < len(p.replicas))
            rows.append({"name": name, "partitions": len(parts), "replication": rf,
                         "messages": msgs, "end_offsets": end_sum, "rate": rate,
                         "unhealthy_partitions": urp})
        return {"topics": rows, "page": found.page, "pages": found.pages, "size": found.size,
                "total": found.total}

    def topic_detail(self, name: str) -> dict[str, Any]:
        t = self._topic(name)
        tps = [(name, p) for p in sorted(t.partitions)]
        ends = self.offsets(tps, OffsetSpec.latest())
        starts = self.offsets(tps, OffsetSpec.earliest())
        parts = [{"partition": p.id, "leader": p.leader, "replicas": list(p.replicas),
                  "isr": list(p.isrs), "start": starts.get((name, p.id), -1),
                  "end": ends.get((name, p.id), -1)}
                 for p in sorted(t.partitions.values(), key=lambda p: p.id)]
        return {"name": name, "partitions": parts, "configs": self.topic_configs(name)}

    def topic_configs(self, name: str) -> list[dict[str, Any]]:
        res = ConfigResource(ResourceType.TOPIC, name)
        futures = self.admin.describe_configs([res], request_timeout=TIMEOUT_S)
        entries = result(futures[res])
        out = []
        for key in sorted(entries):
            e: ConfigEntry = entries[key]
            out.append({"name": e.name, "value": None if e.is_sensitive else e.value,
                        "source": _source_name(e.source),
                        "default": bool(e.is_default), "read_only": bool(e.is_read_only),
                        "sensitive": bool(e.is_sensitive)})
        return out

    def create_topic(self, name: str, partitions: int, replication: int,
                     configs: dict[str, str]) -> None:
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication,
                      config=configs)], request_timeout=TIMEOUT_S)
        result(futures[name])
        self.metadata(fresh=True)

    def delete_topic(self, name: str) -> None:
        futures = self.admin.delete_topics([name], request_timeout=TIMEOUT_S)
        result(futures[name])
        self._ends_seen.pop(name, None)
        self.metadata(fresh=True)

    def alter_topic_configs(self, name: str, set_: dict[str, str], delete: list[str]) -> None:
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                   for k, v in set_.items()]
        entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE)
                    for k in delete]
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([res], request_timeout=TIMEOUT_S)
        result(futures[res])

    def add_partitions(self, name: str, total: int) -> None:
        futures = self.admin.create_partitions([NewPartitions(name, total)],
                                               request_timeout=TIMEOUT_S)
        result(futures[name])
        self.metadata(fresh=True)
