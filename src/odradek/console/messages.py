"""Reading and writing records for the console: a page of records from a start point (oldest,
newest, an offset or a time), a search that scans and streams its matches with a progress
count, and a produce from the form.

Reads use a consumer with assign() and no group (nothing is committed), stopping at the log
end offsets seen when the read began, so a busy topic still gives a bounded answer.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from odradek.client import consumer, producer
from odradek.console.cluster import TIMEOUT_S, Cluster, KafkaFailure, error_text
from odradek.console.decode import Decoder
from odradek.console.paging import BadRequest

MAX_BROWSE = 500
PROGRESS_EVERY = 2000  # records scanned between two progress lines of a search
START_MODES = ("newest", "oldest", "offset", "timestamp")


@dataclass(frozen=True)
class Filters:
    key: str = ""
    value: str = ""
    header: str = ""  # NAME, or NAME=VALUE
    json_path: str = ""  # a.b.0.c=VALUE (or just a path: it must exist)

    def empty(self) -> bool:
        return not (self.key or self.value or self.header or self.json_path)


def _walk(value: Any, path: list[str]) -> tuple[bool, Any]:
    for step in path:
        if isinstance(value, dict) and step in value:
            value = value[step]
        elif isinstance(value, list) and step.lstrip("-").isdigit() and \
                -len(value) <= int(step) < len(value):
            value = value[int(step)]
        else:
            return False, None
    return True, value


class Candidate:
    """A record as the search sees it: the text of its key and value (the bytes as UTF-8, or
    the registry's decoding of wire-format bytes), its headers, and its value as JSON, each
    made only when a filter asks (the scan's cost is in decoding, and most records fail the
    first filter)."""

    def __init__(self, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]], decoder: Decoder) -> None:
        self.key, self.value, self.headers, self.decoder = key, value, headers, decoder
        self._decoded: dict[str, Any] | None = None

    def _wire(self, raw: bytes) -> bool:
        return self.decoder.registry_url is not None and len(raw) >= 5 and raw[0] == 0

    def text(self, raw: bytes | None) -> str:
        if raw is None:
            return ""
        if self._wire(raw):
            v = self.decoder.decode(raw)["value"]
            return v if isinstance(v, str) else json.dumps(v)
        return raw.decode(errors="replace")

    def contains(self, raw: bytes | None, needle: str) -> bool:
        """Does the text hold `needle` (already lower-case)? ASCII needles are looked for in
        the bytes themselves, without decoding (the scan's hot path)."""
        if raw is None:
            return False
        if needle.isascii() and not self._wire(raw):
            return needle.encode() in raw.lower()
        return needle in self.text(raw).lower()

    def value_json(self) -> Any:
        if self._decoded is None:
            self._decoded = self.decoder.decode(self.value)
        return self._decoded["value"]


def match(c: Candidate, f: Filters) -> bool:
    """Does the record pass every filter given? Substrings ignore case."""
    if f.key and not c.contains(c.key, f.key.lower()):
        return False
    if f.value and not c.contains(c.value, f.value.lower()):
        return False
    if f.header:
        name, eq, want = f.header.partition("=")
        if not any(n == name and (not eq or want in (v or b"").decode(errors="replace"))
                   for n, v in c.headers):
            return False
    if f.json_path:
        path, eq, want = f.json_path.partition("=")
        steps = [s for s in path.strip().lstrip("$").strip(".").replace("[", ".")
                 .replace("]", "").split(".") if s]
        found, got = _walk(c.value_json(), steps)
        if not found:
            return False
        if eq and (json.dumps(got) if not isinstance(got, str) else got) != want.strip():
            return False
    return True


def record_json(msg: Any, decoder: Decoder) -> dict[str, Any]:
    kind, ts = msg.timestamp()
    headers = []
    for name, value in msg.headers() or []:
        try:
            text = value.decode() if value is not None else None
        except UnicodeDecodeError:
            text = "base64:" + base64.b64encode(value).decode()
        headers.append({"name": name, "value": text})
    return {"partition": msg.partition(), "offset": msg.offset(), "timestamp": ts,
            "timestamp_type": kind, "key": decoder.decode(msg.key()),
            "value": decoder.decode(msg.value()), "headers": headers}


class Reader:
    def __init__(self, cluster: Cluster, decoder: Decoder) -> None:
        self.cluster = cluster
        self.decoder = decoder

    def _starts(self, topic: str, partitions: list[int], mode: str, at: str,
                per_partition: int) -> tuple[dict[int, int], dict[int, int]]:
        """({partition: first offset to read}, {partition: end offset to stop at})."""
        tps = [(topic, p) for p in partitions]
        lo = self.cluster.offsets(tps, OffsetSpec.earliest())
        hi = self.cluster.offsets(tps, OffsetSpec.latest())
        starts: dict[int, int] = {}
        if mode == "oldest":
            starts = {p: lo[(topic, p)] for p in partitions}
        elif mode == "newest":
            starts = {p: max(lo[(topic, p)], hi[(topic, p)] - per_partition) for p in partitions}
        elif mode == "offset":
            try:
                offset = int(at.strip())
            except ValueError:
                raise BadRequest(f"the offset must be an integer, got {at[:40]!r}") from None
            if offset < 0:
                raise BadRequest(f"the offset must be 0 or more, got {offset}")
            starts = {p: min(max(offset, lo[(topic, p)]), hi[(topic, p)]) for p in partitions}
        elif mode == "timestamp":
            from odradek.console.groups import parse_timestamp_ms

            stamp = parse_timestamp_ms(at)
            found = self.cluster.offsets(tps, OffsetSpec.for_timestamp(stamp))
            starts = {p: found[(topic, p)] if found[(topic, p)] >= 0 else hi[(topic, p)]
                      for p in partitions}
        else:
            raise BadRequest(f"start must be one of {', '.join(START_MODES)}, not {mode[:20]!r}")
        return starts, {p: hi[(topic, p)] for p in partitions}

    def _partitions(self, topic: str, partition: int | None) -> list[int]:
        t = self.cluster._topic(topic)
        if partition is None:
            return sorted(t.partitions)
        if partition not in t.partitions:
            raise KafkaFailure(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic!r} has no partition "
                               f"{partition}", 404)
        return [partition]

    def _scan(self, topic: str, starts: dict[int, int],
              ends: dict[int, int]) -> Iterator[Any]:
        """Every record from starts to ends, partition by partition as they arrive."""
        todo = {p: s for p, s in starts.items() if s < ends[p]}
        if not todo:
            return
        c = consumer(self.cluster.bootstrap, self.cluster.overrides,
                     group_id=f"odradek-console-{os.getpid()}", enable_partition_eof=True)
        try:
            c.assign([TopicPartition(topic, p, s) for p, s in todo.items()])
            idle_since = time.monotonic()
            while todo:
                batch = c.consume(500, 1.0)
                if not batch and time.monotonic() - idle_since > TIMEOUT_S:
                    raise KafkaFailure("the read stopped: no records came in "
                                       f"{TIMEOUT_S:.0f} s", 504)
                for msg in batch:
                    idle_since = time.monotonic()
                    p = msg.partition()
                    if p not in todo:
                        continue
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            if msg.offset() >= ends[p]:
                                del todo[p]
                            continue
                        raise KafkaFailure(f"{err.name()}: {err.str()}")
                    if msg.offset() >= ends[p]:  # written after the read began
                        del todo[p]
                        continue
                    yield msg
                    if msg.offset() + 1 >= ends[p]:
                        del todo[p]
        except KafkaException as exc:
            raise KafkaFailure(error_text(exc)) from None
        finally:
            c.close()

    def browse(self, topic: str, partition: int | None, mode: str, at: str, limit: int,
               newest_first: bool) -> dict[str, Any]:
        if not 1 <= limit <= MAX_BROWSE:
            raise BadRequest(f"limit must be between 1 and {MAX_BROWSE}, got {limit}")
        parts = self._partitions(topic, partition)
        starts, ends = self._starts(topic, parts, mode, at, limit)
        if mode != "newest":  # from a point: at most `limit` records after it
            ends = {p: min(ends[p], starts[p] + limit) for p in parts}
        rows = [record_json(m, self.decoder) for m in self._scan(topic, starts, ends)]
        rows.sort(key=lambda r: (r["timestamp"], r["partition"], r["offset"]),
                  reverse=newest_first)
        if mode == "newest":
            rows = rows[:limit] if newest_first else rows[-limit:]
        else:
            rows = rows[-limit:] if newest_first else rows[:limit]
        return {"records": rows, "starts": starts, "ends": ends}

    def search(self, topic: str, partition: int | None, mode: str, at: str, f: Filters,
               max_scan: int, max_matches: int) -> Iterator[dict[str, Any]]:
        """NDJSON events: {"progress": scanned, "of": total}, {"match": record}, and last
        {"done": scanned, "matches": n}. Errors after the start are an {"error": text}."""
        if f.empty():
            raise BadRequest("give at least one of key, value, header or json path to search")
        parts = self._partitions(topic, partition)
        if mode == "newest":  # search back from the end: the newest max_scan records
            starts, ends = self._starts(topic, parts, "newest", at,
                                        max(1, max_scan // max(len(parts), 1)))
        else:
            starts, ends = self._starts(topic, parts, mode, at, 0)
        total = min(sum(ends[p] - starts[p] for p in parts), max_scan)
        yield {"progress": 0, "of": total}
        scanned = found = 0
        try:
            for msg in self._scan(topic, starts, ends):
                scanned += 1
                if match(Candidate(msg.key(), msg.value(), msg.headers() or [], self.decoder),
                         f):
                    found += 1
                    yield {"match": record_json(msg, self.decoder)}
                if scanned % PROGRESS_EVERY == 0:
                    yield {"progress": scanned, "of": total, "matches": found}
                if scanned >= max_scan or found >= max_matches:
                    break
        except KafkaFailure as exc:
            yield {"error": exc.message}
        yield {"done": scanned, "of": total, "matches": found}


def produce(cluster: Cluster, topic: str, partition: int | None, key: str | None,
            value: str | None, headers: list[tuple[str, str]]) -> dict[str, Any]:
    """One record, acks=all; its partition and offset, or KafkaFailure."""
    cluster._topic(topic)
    p = producer(cluster.bootstrap, cluster.overrides, acks="all")
    out: dict[str, Any] = {}

    def done(err: Any, msg: Any) -> None:
        if err is not None:
            out["error"] = f"{err.name()}: {err.str()}"
        else:
            out.update(partition=msg.partition(), offset=msg.offset())

    kwargs: dict[str, Any] = {"key": key.encode() if key is not None else None,
                              "value": value.encode() if value is not None else None,
                              "headers": [(n, v.encode()) for n, v in headers],
                              "on_delivery": done}
    if partition is not None:
        kwargs["partition"] = partition
    try:
        p.produce(topic, **kwargs)
    except (KafkaException, BufferError) as exc:
        raise KafkaFailure(error_text(exc)) from None
    left = p.flush(TIMEOUT_S)
    if left or not out:
        raise KafkaFailure("the record was not acknowledged in time", 504)
    if "error" in out:
        raise KafkaFailure(out["error"])
    return out
