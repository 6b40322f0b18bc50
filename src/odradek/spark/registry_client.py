"""A Schema Registry client for the Spark serde: Confluent's REST API over urllib, picklable
(codecs travel to Spark's Python workers with it; caches are rebuilt there).

    registry = RegistryClient.from_config({"schema.registry.url": "http://localhost:8081"})

It offers what the codecs need: a schema by id (any type, with its references), register,
lookup, and the latest version of a subject. Errors from the registry are RegistryRefused with
Confluent's error code; an unreachable registry is RegistryUnavailable. Both are ValueErrors.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

CT = "application/vnd.schemaregistry.v1+json"
URL_KEY = "schema.registry.url"


class RegistryRefused(ValueError):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.status, self.code, self.message = status, code, message


class RegistryUnavailable(ValueError):
    pass


@dataclass(frozen=True)
class Registered:
    """One schema as the registry holds it."""

    schema_id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[tuple[str, str, int], ...] = ()
    subject: str | None = None
    version: int | None = None


@dataclass
class RegistryClient:
    url: str
    timeout: float = 30.0
    _by_id: dict[tuple[int, str | None], Registered] = field(default_factory=dict, repr=False)
    _by_version: dict[tuple[str, int, str | None], Registered] = field(default_factory=dict,
                                                                        repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RegistryClient:
        """From Confluent's client settings: `schema.registry.url` (the first of a list)."""
        url = str(config.get(URL_KEY) or "").split(",")[0].strip()
        if not url:
            raise ValueError(f"{URL_KEY} is required")
        return cls(url.rstrip("/"))

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], state["timeout"])  # type: ignore[misc]

    # ---- HTTP -------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": CT, "Accept": CT})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                err = json.loads(raw)
                code, message = int(err["error_code"]), str(err["message"])
            except (ValueError, KeyError, TypeError):
                code, message = exc.code, raw.decode(errors="replace")[:200]
            raise RegistryRefused(exc.code, code, message) from None
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryUnavailable(f"schema registry {self.url}: "
                                      f"{getattr(exc, 'reason', exc)}") from None

    @staticmethod
    def _registered(obj: dict[str, Any], schema_id: int | None = None) -> Registered:
        refs = tuple((r["name"], r["subject"], int(r["version"]))
                     for r in obj.get("references") or [])
        return Registered(int(obj.get("id", schema_id or 0)), obj["schema"],
                          obj.get("schemaType", "AVRO"), refs, obj.get("subject"),
                          obj.get("version"))

    # ---- reads (cached: a schema id and a subject version never change) ----------------------
    def by_id(self, schema_id: int, fmt: str | None = None) -> Registered:
        key = (schema_id, fmt)
        with self._lock:
            hit = self._by_id.get(key)
        if hit is None:
            query = f"?format={fmt}" if fmt else ""
            hit = self._registered(self.call("GET", f"/schemas/ids/{schema_id}{query}"), schema_id)
            with self._lock:
                self._by_id[key] = hit
        return hit

    def version(self, subject: str, version: int, fmt: str | None = None) -> Registered:
        key = (subject, version, fmt)
        with self._lock:
            hit = self._by_version.get(key)
        if hit is None:
            query = f"?deleted=true&format={fmt}" if fmt else "?deleted=true"
            hit = self._registered(self.call(
                "GET", f"/subjects/{quote(subject, safe='')}/versions/{version}{query}"))
            with self._lock:
                self._by_version[key] = hit
        return hit

    def latest(self, subject: str, fmt: str | None = None) -> Registered:
        """The subject's latest version now (not cached: it moves)."""
        query = f"?format={fmt}" if fmt else ""
        return self._registered(self.call(
            "GET", f"/subjects/{quote(subject, safe='')}/versions/latest{query}"))

    def schema_by_id(self, schema_id: int) -> Any:
        """The Avro schema of `schema_id` as fastavro takes it (avro.SchemaRegistry); KeyError
        when the registry has no such id."""
        try:
            found = self.by_id(schema_id)
        except RegistryRefused as exc:
            if exc.code == 40403:
                raise KeyError(schema_id) from None
            raise
        if found.schema_type != "AVRO":
            raise KeyError(schema_id)
        return json.loads(found.schema)

    # ---- writes -----------------------------------------------------------------------------
    @staticmethod
    def _body(schema: str, schema_type: str, references: Any) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": schema}
        if schema_type != "AVRO":
            body["schemaType"] = schema_type
        if references:
            body["references"] = [{"name": n, "subject": s, "version": v}
                                  for n, s, v in references]
        return body

    def register(self, subject: str, schema: Any, schema_type: str = "AVRO",
                 references: Any = ()) -> int:
        """The id of `schema` under `subject`, registering it when new (avro.SchemaRegistry)."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return int(self.call("POST", f"/subjects/{quote(subject, safe='')}/versions",
                             self._body(text, schema_type, references))["id"])

    def lookup(self, subject: str, schema: Any, schema_type: str = "AVRO",
               references: Any = ()) -> Registered:
        """The version of `subject` that holds `schema`; RegistryRefused (40401/40403) if none."""
        text = schema if isinstance(schema, str) else json.dumps(schema)
        return self._registered(self.call("POST", f"/subjects/{quote(subject, safe='')}",
                                          self._body(text, schema_type, references)))
