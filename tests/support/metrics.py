"""Reading a node's admin HTTP from tests: /metrics parsed by prometheus-client's parser."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str, timeout: float = 10.0) -> tuple[int, bytes]:
    """(status, body) of a GET, 4xx/5xx included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str) -> tuple[int, Any]:
    status, body = get(url)
    return status, json.loads(body)


def scrape(admin_url: str) -> Samples:
    status, body = get(admin_url + "/metrics")
    assert status == 200, body[:500]
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when absent (a counter not yet created)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
