"""Per-API request counts and latency histograms, kept as plain ints in flat lists.

`measured_dispatch`'s closure runs once per request on the event loop. Its cost is the
metrics' cost on the hot path (bench/RESULTS.md, issue 18), so it is written for few
bytecodes: one perf_counter call (and one per read in the server), the header read by
index (a NamedTuple's attribute is a property call), one list per api key holding its three
histograms and their sums at constant offsets, a bisect only for times past the first
bucket, no method call on the way, no prometheus-client object (its `labels().inc()` costs a dict
lookup, a lock and a float add per call). The collector turns these lists into Kafka's
`kafka_network_requestmetrics_*` families at scrape time.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
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
_perf = time.perf_counter


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics (`Produce`, `ListOffsets`, `ApiVersions`)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


# the layout of a key's row in RequestStats.rows: the queue, local and total histograms'
# buckets, then their sums in seconds. The measuring closure writes these offsets as
# literals (a constant costs less than a variable on every request): they must stay so.
QUEUE, LOCAL, TOTAL, SUMS = 0, NB, 2 * NB, 3 * NB
assert (LOCAL, TOTAL, SUMS) == (18, 36, 54), "measured_dispatch's literal offsets"
ROW = SUMS + 3
# versions counted per key; ApiVersions answers any int16 version (with its error), so its
# row holds them all: a negative version indexes from the end, as i - 65536
VERSIONS = 64
_API_VERSIONS_KEY = int(ApiKey.API_VERSIONS)


class RequestStats:
    """Every API's counters for one node, and the slow-request threshold.

    `versions[key][version]` counts requests; `rows[key]` holds the bucket counts of the
    queue, local and total time histograms and their sums in seconds (QUEUE, LOCAL, TOTAL,
    SUMS). One list per key: a request looks its key up once, then writes at constant offsets.
    """

    def __init__(self, slow_ms: int = -1) -> None:
        self.versions = [[0] * (1 << 16 if key == _API_VERSIONS_KEY else VERSIONS)
                         for key in range(MAX_KEY)]
        self.rows: list[list[Any]] = [[0] * SUMS + [0.0] * 3 for _ in range(MAX_KEY)]
        self.slow_s = slow_ms / 1000 if slow_ms >= 0 else float("inf")

    def count(self, key: int, version: int) -> None:
        """A request of a version outside its key's row (only a Dispatcher that served such a
        version would call this): counted at the row's last version."""
        row = self.versions[key]
        row[version if -len(row) <= version < len(row) else len(row) - 1] += 1

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        """One answered request: received (read off the socket), started (handler called),
        handled (handler returned), done (answer ready); perf_counter seconds."""
        key = header[0]
        if not 0 <= key < MAX_KEY:
            return
        self.count(key, header[1])
        row = self.rows[key]
        for offset, seconds in ((QUEUE, started - received), (LOCAL, handled - started),
                                (TOTAL, done - received)):
            row[offset + bisect_left(_BUCKETS_S, seconds)] += 1
            row[SUMS + offset // NB] += seconds
        if done - received > self.slow_s:
            self.slow(header, started - received, handled - started, done - received)

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
        for key, row in enumerate(self.versions):
            if any(row):
                out.append((key, {(v if v < 1 << 15 else v - (1 << 16)): n
                                  for v, n in enumerate(row) if n}))
        return out

    def buckets(self, kind: str, key: int) -> list[int]:
        """Bucket counts (not cumulative) of `kind` ("queue", "local", "total") for `key`."""
        offset = {"queue": QUEUE, "local": LOCAL, "total": TOTAL}[kind]
        return self.rows[key][offset:offset + NB]  # type: ignore[no-any-return]

    def seconds(self, kind: str, key: int) -> float:
        """The sum of `kind`'s observations for `key`, in seconds."""
        return float(self.rows[key][SUMS + {"queue": 0, "local": 1, "total": 2}[kind]])


def bound_call(target: Any) -> Any:
    """What to call for `target`: an object's bound __call__, which the interpreter calls in
    the same frame loop as a Python function; the object itself goes through a C slot and
    a new frame loop (bench.metrics_cost: about 250 instructions more per call)."""
    if isinstance(target, types.FunctionType | types.MethodType):
        return target
    return target.__call__


def measured_dispatch(inner: Any, stats: RequestStats) -> Any:
    """The server's dispatch with each request recorded in `stats`: wraps the Dispatcher,
    so the unmeasured path (admin.listeners empty, no slow log) runs the Dispatcher as it is.
    A closure, not an object with __call__: one call level less per request.

    Queue time runs from the read that brought the request (`conn.received`, set by the
    server) to the handler's call; local time is the handler's own run; total time ends
    when the answer is ready (for a long poll or acks=all produce, when its wait ends).
    """
    call = bound_call(inner)
    perf = _perf
    versions, rows = stats.versions, stats.rows
    first = _BUCKETS_S[0]
    bounds = _BUCKETS_S
    slow = stats.slow_s

    def dispatch(conn: Any, frame: memoryview, header: Any) -> Any:
        # One clock read per request (they cost 0.1-0.4 us on a VM): the handler starts
        # where the previous request of the same read ended (the read itself for the first)
        started = conn.last_done
        try:
            result = call(conn, frame, header)
        except BaseException as exc:
            stats.failed(header, conn.received, str(exc) or type(exc).__name__)
            raise
        done = conn.last_done = perf()
        if result is not None and type(result) is not tuple:
            return _later(stats, result, header, conn.received, started, done)
        # RequestStats.record inlined (a call per request saved); the api key is below
        # MAX_KEY here: the Dispatcher refuses unknown keys before calling a handler, and
        # versions outside the advertised range but ApiVersions' (whose row has them all)
        key = header[0]
        try:
            versions[key][header[1]] += 1
        except IndexError:  # free in 3.11 until raised
            stats.count(key, header[1])
        row = rows[key]
        received = conn.received
        queue = started - received
        local = done - started
        total = done - received
        # most times are under the first bound: no bisect then. The offsets are QUEUE (0),
        # LOCAL (18), TOTAL (36) and SUMS (54), as literals
        if queue < first:
            row[0] += 1
        else:
            row[bisect_left(bounds, queue)] += 1
        if local < first:
            row[18] += 1
        else:
            row[18 + bisect_left(bounds, local)] += 1
        if total < first:
            row[36] += 1
        else:
            row[36 + bisect_left(bounds, total)] += 1
        row[54] += queue
        row[55] += local
        row[56] += total
        if total > slow:
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
