"""JSON over HTTP to the Schema Registry (Confluent's API) and a node's admin HTTP.

Blocking urllib calls, made from worker threads. A refusal keeps the other side's message
(the registry's `message` and `error_code`), so the console shows it as it is.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

CT = "application/vnd.schemaregistry.v1+json"


class HttpFailure(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def call(base: str, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method,
                                 headers={"Content-Type": CT, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            err = json.loads(raw)
            code = err.get("error_code")
            text = str(err.get("message") or err.get("error") or raw[:200])
            raise HttpFailure(exc.code, f"{text} ({code})" if code else text) from None
        except (ValueError, AttributeError):
            raise HttpFailure(exc.code, raw.decode(errors="replace")[:200]
                              or str(exc.reason)) from None
    except (urllib.error.URLError, OSError) as exc:
        raise HttpFailure(502, f"cannot reach {base}: {getattr(exc, 'reason', exc)}") from None
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        raise HttpFailure(502, f"{base} answered something that is not JSON") from None
