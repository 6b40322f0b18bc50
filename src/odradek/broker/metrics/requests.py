"""Per-API request counts and latency histograms, kept as plain ints in flat lists.

`measured_dispatch`'s closure runs once per request on the event loop. Its cost is the
metrics' cost on the hot path (bench/RESULTS-metrics.md), so it is written for few
bytecodes: two perf_counter calls, the header read by index (a NamedTuple's attribute is a
property call), one flat list per histogram indexed by api key and bucket, three bisects,
no method call on the way, no prometheus-client object (its `labels().inc()` costs a dict
lookup, a lock and a float add per call). The collector turns these lists into Kafka's
`kafka_network_requestmetrics_*` families at scrape time.
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
_BUCKETS_S = tuple(b / 1000 for b in BUCKETS_MS)  # compared with perf_counter seconds
NB = len(BUCKETS_MS) + 1  # buckets per api, +Inf included
MAX_KEY = 128  # api keys counted (higher ones are refused before any handler runs)
MAX_VERSION = 32  # versions counted per api key; a higher one counts as MAX_VERSION - 1
_perf = time.perf_counter


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics (`Produce`, `ListOffsets`, `ApiVersions`)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


class RequestStats:
    """Every API's counters for one node, and the slow-request threshold.

    `counts[key * MAX_VERSION + version]` counts requests; `queue`, `local` and `total`
    hold bucket counts at `key * NB + bucket`; the `*_sum` lists hold seconds per key.
    """

    def __init__(self, slow_ms: int = -1) -> None:
        self.counts = [0] * (MAX_KEY * MAX_VERSION)
        self.queue = [0] * (MAX_KEY * NB)
        self.local = [0] * (MAX_KEY * NB)
        self.total = [0] * (MAX_KEY * NB)
        self.queue_sum = [0.0] * MAX_KEY
        self.local_sum = [0.0] * MAX_KEY
        self.total_sum = [0.0] * MAX_KEY
        self.slow_s = slow_ms / 1000 if slow_ms >= 0 else float("inf")

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        """One answered request: received (read off the socket), started (handler called),
        handled (handler returned), done (answer ready); perf_counter seconds."""
        key = header[0]
        if not 0 <= key < MAX_KEY:
            return
        version = header[1]
        self.counts[key * MAX_VERSION + (version if 0 <= version < MAX_VERSION
                                         else MAX_VERSION - 1)] += 1
        queue = started - received
        local = handled - started
        total = done - received
        base = key * NB
        self.queue[base + bisect_left(_BUCKETS_S, queue)] += 1
        self.local[base + bisect_left(_BUCKETS_S, local)] += 1
        self.total[base + bisect_left(_BUCKETS_S, total)] += 1
        self.queue_sum[key] += queue
        self.local_sum[key] += local
        self.total_sum[key] += total
        if total > self.slow_s:
            self.slow(header, queue, local, total)

    def slow(self, header: Any, queue: float, local: float, total: float) -> None:
        log.warning("slow request: %s from client %r took %.1f ms (queue %.1f ms, "
                    "handler %.1f ms; request.slow.log.ms=%d)",
                    api_name(header.api_key, header.api_version), header.client_id,
                    total * 1000, queue * 1000, local * 1000, int(self.slow_s * 1000))

    def failed(self, header: Any, received: float, why: str | None) -> None:
        """A request that ended without an answer (the connection closed, a handler failed):
        logged with its client id, API, version and time (its error code, when it had one,
        is counted where it was refused: refusals.ERRORS)."""
        log.warning("failed request: %s from client %r after %.1f ms: %s",
                    api_name(header.api_key, header.api_version), header.client_id,
                    (_perf() - received) * 1000, why or "connection closed")

    def apis(self) -> list[tuple[int, dict[int, int]]]:
        """(api key, {version: count}) of every api key that was called."""
        out = []
        counts = self.counts
        for key in range(MAX_KEY):
            row = counts[key * MAX_VERSION:(key + 1) * MAX_VERSION]
            if any(row):
                out.append((key, {v: n for v, n in enumerate(row) if n}))
        return out

    def buckets(self, kind: str, key: int) -> list[int]:
        return getattr(self, kind)[key * NB:(key + 1) * NB]  # type: ignore[no-any-return]


def measured_dispatch(inner: Any, stats: RequestStats) -> Any:
    """The server's dispatch with each request recorded in `stats`: wraps the Dispatcher,
    so the unmeasured path (admin.listeners empty, no slow log) runs the Dispatcher as it is.
    A closure, not an object with __call__: one call level less per request.

    Queue time runs from the read that brought the request (`conn.received`, set by the
    server) to the handler's call; local time is the handler's own run; total time ends
    when the answer is ready (for a long poll or acks=all produce, when its wait ends).
    """
    perf = _perf
    counts, queue_b, local_b, total_b = stats.counts, stats.queue, stats.local, stats.total
    queue_sum, local_sum, total_sum = stats.queue_sum, stats.local_sum, stats.total_sum
    first = _BUCKETS_S[0]
    bounds = _BUCKETS_S
    versions = MAX_VERSION  # closure cells: cheaper to read than globals
    top_version = MAX_VERSION - 1
    per_key = NB

    def dispatch(conn: Any, frame: memoryview, header: Any) -> Any:
        # One clock read per request (they cost 0.1-0.4 us on a VM): the handler starts
        # where the previous request of the same read ended (the read itself for the first)
        started = conn.last_done
        try:
            result = inner(conn, frame, header)
        except BaseException as exc:
            stats.failed(header, conn.received, str(exc) or type(exc).__name__)
            raise
        done = conn.last_done = perf()
        if result is not None and type(result) is not tuple:
            return _later(stats, result, header, conn.received, started, done)
        # RequestStats.record inlined (a call per request saved); the api key is below
        # MAX_KEY here: the Dispatcher refuses unknown keys before calling a handler
        key = header[0]
        version = header[1]
        counts[key * versions + (version if version < versions else top_version)] += 1
        received = conn.received
        queue = started - received
        local = done - started
        total = done - received
        base = key * per_key
        # queue and handler times are mostly under the first bound: skip the bisect then
        queue_b[base if queue < first else base + bisect_left(bounds, queue)] += 1
        local_b[base if local < first else base + bisect_left(bounds, local)] += 1
        total_b[base + bisect_left(bounds, total)] += 1
        queue_sum[key] += queue
        local_sum[key] += local
        total_sum[key] += total
        if total > stats.slow_s:
            stats.slow(header, queue, local, total)
        return result

    dispatch.stats = stats  # type: ignore[attr-defined]  # the server times reads for it
    dispatch.inner = inner  # type: ignore[attr-defined]
    return dispatch


def _later(stats: RequestStats, result: Any, header: Any, received: float, started: float,
           handled: float) -> Any:
    """An answer that comes later (a coroutine): recorded when it is ready."""
    task = asyncio.ensure_future(result)

    def done(t: asyncio.Future[Any]) -> None:
        if t.cancelled() or t.exception() is not None:
            exc = None if t.cancelled() else t.exception()
            stats.failed(header, received, str(exc) if exc else "cancelled")
            return
        stats.record(header, received, started, handled, _perf())

    task.add_done_callback(done)
    return task
