"""Broker-side schema ID validation, as Confluent Server does it (issue 17).

A topic with `confluent.value.schema.validation=true` (or `.key.`) takes only records whose
value (key) is in the Confluent wire format (magic byte 0, a 4-byte big-endian schema id)
with an id the Schema Registry lists under the topic's subject (`<topic>-value`, Confluent's
TopicNameStrategy). Null values (tombstones) and null keys pass, as in Confluent's. Data is
not introspected: the id is checked, not the bytes against the schema.

Only topics that ask pay: the topics with validation on are found once per metadata image,
and the produce path tests one dict for everyone else. Records of those topics are decoded
(the only produce path that does). Lookups go to the registry
(`confluent.schema.registry.url`, else the node's own `schema.registry.listeners`) in a
thread, `GET /schemas/ids/{id}/versions`, and are cached: a registered (id, subject) for
`POSITIVE_TTL_S`, an unregistered one for `NEGATIVE_TTL_S`, so a schema registered a moment
ago is accepted soon after. A registry that cannot be reached fails the produce with a
retriable REQUEST_TIMED_OUT naming it (nothing appended, the client retries), never an
unvalidated append.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from odradek.protocol.errors import ProtocolError
from odradek.protocol.primitives import decode_uvarint_short as _uvarint
from odradek.protocol.records import iter_batches
from odradek.storage.cleaner.batches import batch_body

log = logging.getLogger(__name__)

POSITIVE_TTL_S = 300.0
NEGATIVE_TTL_S = 2.0
HTTP_TIMEOUT_S = 5.0
MAGIC = 0
_KINDS = ("key", "value")
_UNSEEN = object()


class RegistryUnavailable(Exception):
    """No registry answered: the produce is retried, never let through unchecked."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One partition's records: `missing` (subject, id) pairs not yet known to the cache; once
    none are missing, `errors` lists (index in the request's batches, message)."""

    missing: frozenset[tuple[str, int]]
    errors: tuple[tuple[int, str], ...]


class SchemaValidation:
    def __init__(self, urls: list[str]) -> None:
        self.urls = [u.rstrip("/") for u in urls if u.strip()]
        self._topics_of: tuple[Any, dict[str, tuple[bool, bool]]] | None = None
        # (subject, id) -> (registered, until monotonic time)
        self._cache: dict[tuple[str, int], tuple[bool, float]] = {}

    # ------------------------------------------------------------------ which topics

    def topics(self, image: Any) -> dict[str, tuple[bool, bool]]:
        """topic -> (validate keys, validate values), for the topics that validate anything;
        rebuilt only when the image changes."""
        cached = self._topics_of
        if cached is not None and cached[0] is image:
            return cached[1]
        found: dict[str, tuple[bool, bool]] = {}
        for (kind, name), configs in image.configs.items():
            if kind != 2:  # ConfigResource TOPIC
                continue
            flags = tuple(_true(configs.get(f"confluent.{k}.schema.validation")) for k in _KINDS)
            if any(flags):
                found[name] = (flags[0], flags[1])
        self._topics_of = (image, found)
        return found

    # ------------------------------------------------------------------ the records

    def judge(self, topic: str, flags: tuple[bool, bool], records: memoryview | None) -> Verdict:
        """Every record of the partition's batches against the cache. Batches that cannot be
        read are left to the log validator, which refuses them with its own error."""
        if records is None:
            return Verdict(frozenset(), ())
        now = time.monotonic()
        missing: set[tuple[str, int]] = set()
        errors: list[tuple[int, str]] = []
        # the verdict on each distinct 5-byte prefix, per kind: a batch nearly always carries
        # one schema id, so the cache is asked once per batch, not once per record
        seen: tuple[dict[bytes, str | None], dict[bytes, str | None]] = ({}, {})
        kinds = [k for k in (0, 1) if flags[k]]
        index = 0
        try:
            for header, batch in iter_batches(records):
                if header.is_control:
                    continue
                scanned = record_prefixes(batch_body(header, batch), header.records_count)
                for k in kinds:
                    verdicts = seen[k]
                    for i, prefixes in enumerate(scanned):
                        data = prefixes[k]
                        if data is None:
                            continue
                        problem = verdicts.get(data, _UNSEEN)
                        if problem is _UNSEEN:
                            problem = verdicts[data] = self._problem(topic, _KINDS[k], data,
                                                                     now, missing)
                        if problem is not None:
                            errors.append((index + i, problem))
                index += len(scanned)
        except (ProtocolError, IndexError):
            return Verdict(frozenset(), ())  # the log validator refuses it with its own error
        # one entry per record (a bad key and a bad value name the record once), in order
        first: dict[int, str] = {}
        for i, message in errors:
            first.setdefault(i, message)
        return Verdict(frozenset(missing), tuple(sorted(first.items())))

    def _problem(self, topic: str, kind: str, data: bytes, now: float,
                 missing: set[tuple[str, int]]) -> str | None:
        subject = f"{topic}-{kind}"
        if len(data) < 5 or data[0] != MAGIC:
            return (f"the record's {kind} is not in the Confluent wire format (magic byte 0 "
                    f"and a schema id), as {topic}'s confluent.{kind}.schema.validation asks")
        schema_id = int.from_bytes(data[1:5], "big")
        hit = self._cache.get((subject, schema_id))
        if hit is None or hit[1] < now:
            missing.add((subject, schema_id))
            return None
        if not hit[0]:
            return (f"schema id {schema_id} in the record's {kind} is not registered under "
                    f"subject {subject}")
        return None

    # ------------------------------------------------------------------ the registry

    async def resolve(self, pairs: frozenset[tuple[str, int]]) -> None:
        """Ask the registry about each (subject, id) and cache the answers."""
        await asyncio.to_thread(self._resolve_blocking, pairs)

    def _resolve_blocking(self, pairs: frozenset[tuple[str, int]]) -> None:
        by_id: dict[int, set[str]] = {}
        for subject, schema_id in pairs:
            by_id.setdefault(schema_id, set()).add(subject)
        for schema_id, subjects in by_id.items():
            registered = self._subjects_of(schema_id)
            now = time.monotonic()
            for subject in subjects:
                ok = subject in registered
                self._cache[(subject, schema_id)] = (
                    ok, now + (POSITIVE_TTL_S if ok else NEGATIVE_TTL_S))

    def _subjects_of(self, schema_id: int) -> set[str]:
        if not self.urls:
            raise RegistryUnavailable("no Schema Registry is configured "
                                      "(confluent.schema.registry.url, schema.registry.listeners)")
        reasons = []
        for url in self.urls:
            address = f"{url}/schemas/ids/{schema_id}/versions"
            try:
                with urllib.request.urlopen(address, timeout=HTTP_TIMEOUT_S) as resp:
                    body = json.loads(resp.read())
                return {str(item["subject"]) for item in body}
            except urllib.error.HTTPError as exc:
                if exc.code == 404:  # 40403: no schema with this id
                    return set()
                reasons.append(f"{url}: HTTP {exc.code}")
            except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError) as exc:
                reasons.append(f"{url}: {getattr(exc, 'reason', exc)}")
        raise RegistryUnavailable("the Schema Registry did not answer (" + "; ".join(reasons)
                                  + ")")


def record_prefixes(body: bytes, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """Each record's key and value, cut to their first 5 bytes (None when null), reading only
    the varints in front of them: the wire format's magic byte and schema id are all that
    validation looks at, so values and headers are skipped, not decoded. Varints of one and
    two bytes, nearly all of them, are read inline: this loop is what validation costs."""
    out: list[tuple[bytes | None, bytes | None]] = []
    append = out.append
    n = len(body)
    pos = 0
    for _ in range(count):
        v = body[pos]  # the record's length
        if v < 0x80:
            pos += 1
        elif body[pos + 1] < 0x80:
            v = (v & 0x7F) | (body[pos + 1] << 7)
            pos += 2
        else:
            v, pos = _uvarint(body, pos)
        end = pos + ((v >> 1) ^ -(v & 1))
        if end - pos < 6 or end > n:
            raise ProtocolError(f"record length {end - pos} does not fit the batch")
        p = pos + 1  # past the attributes byte, then the timestamp and offset deltas
        p = p + 1 if body[p] < 0x80 else _uvarint(body, p)[1]
        p = p + 1 if body[p] < 0x80 else _uvarint(body, p)[1]
        v = body[p]  # the key's length
        if v < 0x80:
            p += 1
        else:
            v, p = _uvarint(body, p)
        klen = (v >> 1) ^ -(v & 1)
        key = None
        if klen >= 0:
            key = body[p:p + (klen if klen < 5 else 5)]
            p += klen
        v = body[p]  # the value's length
        if v < 0x80:
            p += 1
        elif body[p + 1] < 0x80:
            v = (v & 0x7F) | (body[p + 1] << 7)
            p += 2
        else:
            v, p = _uvarint(body, p)
        vlen = (v >> 1) ^ -(v & 1)
        if p + (vlen if vlen > 0 else 0) > end:
            raise ProtocolError("record key or value runs past the record")
        append((key, body[p:p + (vlen if vlen < 5 else 5)] if vlen >= 0 else None))
        pos = end
    if pos != n:
        raise ProtocolError(f"{n - pos} bytes left after the batch's {count} records")
    return out


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def registry_urls(config: Any) -> list[str]:
    """confluent.schema.registry.url, else this node's own registry."""
    urls = [u for u in config.get_list("confluent.schema.registry.url") if u.strip()]
    if urls:
        return urls
    own = [u for u in config.get_list("schema.registry.listeners") if u.strip()]
    if not own:
        return []
    parts = urllib.parse.urlsplit(own[0])
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    return [f"{parts.scheme}://{host}:{parts.port}"]
