"""Per-API request counts and latency histograms, kept as plain ints.

`RequestStats.record` runs once per request on the event loop: a list index, three
bisects and a few int additions, no locks and no prometheus-client objects (their
`labels().inc()` costs a dict lookup, a lock and a float add per call). The collector
turns these into Kafka's `kafka_network_requestmetrics_*` families at scrape time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from typing import Any

from odradek.broker.refusals import api_name
from odradek.protocol.apis import ApiKey

log = logging.getLogger("odradek.requests")

# upper bounds in ms of the latency histograms (the last bucket is +Inf)
BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
                                 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0)
_NB = len(BUCKETS_MS) + 1
_MAX_KEY = 128  # api keys are below this; others are counted by the Dispatcher's refusal


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics (`Produce`, `ListOffsets`, `ApiVersions`)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


class ApiStats:
    """One API's counters. Times are kept in seconds (sums) and bucket counts."""

    __slots__ = ("by_version", "count", "local", "local_sum", "queue", "queue_sum", "total",
                 "total_sum")

    def __init__(self) -> None:
        self.count = 0
        self.by_version: dict[int, int] = {}
        self.queue = [0] * _NB
        self.local = [0] * _NB
        self.total = [0] * _NB
        self.queue_sum = 0.0
        self.local_sum = 0.0
        self.total_sum = 0.0


class RequestStats:
    """Every API's counters for one node, plus errors by code and the slow-request log."""

    def __init__(self, slow_ms: int = -1) -> None:
        self.apis: list[ApiStats | None] = [None] * _MAX_KEY
        self.slow_s = slow_ms / 1000 if slow_ms >= 0 else float("inf")

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        """One answered request: received (read off the socket), started (handler called),
        handled (handler returned), done (response queued); perf_counter seconds."""
        key = header.api_key
        stats = self.apis[key] if 0 <= key < _MAX_KEY else None
        if stats is None:
            if not 0 <= key < _MAX_KEY:
                return
            stats = self.apis[key] = ApiStats()
        stats.count += 1
        version = header.api_version
        by_version = stats.by_version
        by_version[version] = by_version.get(version, 0) + 1
        queue = started - received
        local = handled - started
        total = done - received
        stats.queue[bisect_left(BUCKETS_MS, queue * 1000.0)] += 1
        stats.local[bisect_left(BUCKETS_MS, local * 1000.0)] += 1
        stats.total[bisect_left(BUCKETS_MS, total * 1000.0)] += 1
        stats.queue_sum += queue
        stats.local_sum += local
        stats.total_sum += total
        if total > self.slow_s:
            log.warning("slow request: %s from client %r took %.1f ms (queue %.1f ms, "
                        "handler %.1f ms; request.slow.log.ms=%d)",
                        api_name(key, version), header.client_id, total * 1000, queue * 1000,
                        local * 1000, int(self.slow_s * 1000))

    def failed(self, header: Any, received: float, why: str | None) -> None:
        """A request that ended without an answer (the connection closed, a handler failed):
        logged with its client id, API, version and time (its error code, when it had one,
        is counted where it was refused: refusals.ERRORS)."""
        log.warning("failed request: %s from client %r after %.1f ms: %s",
                    api_name(header.api_key, header.api_version), header.client_id,
                    (time.perf_counter() - received) * 1000, why or "connection closed")


class MeasuredDispatch:
    """The server's dispatch with each request recorded in `stats`: wraps the Dispatcher,
    so the unmeasured path (admin.listeners empty) runs the Dispatcher as it is.

    Queue time runs from the read that brought the request (`conn.received`, set by the
    server) to the handler's call; local time is the handler's own run; total time ends
    when the answer is ready (for a long poll or acks=all produce, when its wait ends).
    """

    __slots__ = ("inner", "stats")

    def __init__(self, inner: Any, stats: RequestStats) -> None:
        self.inner = inner
        self.stats = stats

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, conn: Any, frame: memoryview, header: Any) -> Any:
        received = conn.received
        started = time.perf_counter()
        try:
            result = self.inner(conn, frame, header)
        except BaseException as exc:
            self.stats.failed(header, received, str(exc) or type(exc).__name__)
            raise
        handled = time.perf_counter()
        if result is None or type(result) is tuple:
            self.stats.record(header, received, started, handled, handled)
            return result
        task = asyncio.ensure_future(result)
        stats = self.stats

        def done(t: asyncio.Future[Any]) -> None:
            if t.cancelled() or t.exception() is not None:
                exc = None if t.cancelled() else t.exception()
                stats.failed(header, received, str(exc) if exc else "cancelled")
                return
            stats.record(header, received, started, handled, time.perf_counter())

        task.add_done_callback(done)
        return task
