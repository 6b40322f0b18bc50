"""Per-API request counts and latency histograms, kept as plain ints in flat lists.

The server (broker.server.Connection._dispatch) records each request itself, inline, right
after its handler: that code runs once per request on the event loop and is the metrics'
cost on the hot path (issue 18: under 3% of the node's CPU per request; bench/RESULTS-s18.md),
so it is written for few bytecodes. One perf_counter call per request (and one per read),
the header read by index (a NamedTuple's attribute is a property call), one list per api
key holding its three histograms and their sums at constant offsets, no method call on the
way, no prometheus-client object (its `labels().inc()` costs a dict lookup, a lock and a
float add per call): the collector turns these lists into Kafka's
`kafka_network_requestmetrics_*` families at scrape time.

What is implied instead of counted: the first bucket of each histogram (a key's request
count, kept per version, less its other buckets) and the local time's sum (the total's less
the queue's and the wait's). So a request under the first bucket (0.1 ms) touches no bucket.

Requests pipelined in one read share their receive time, and each one's handler starts
where the previous one's answer was ready: a queued request's queue time IS the previous
request's total time, and the totals of a read only grow. So the server keeps the bucket of
the last total per connection (`Connection.last_ti`) and takes a queued request's queue
bucket from it, and its total's bucket by stepping up from there (usually no step or one;
a bisect costs a C call and five float comparisons); only a local (handler) time past the
first bucket is bisected, which a small request's never is.
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
BUCKETS_S = tuple(b / 1000 for b in BUCKETS_MS)  # compared with perf_counter seconds
# each bucket's upper bound, +Inf's included: a bucket index steps up while a time passes it
UPPER_S = (*BUCKETS_S, float("inf"))
NB = len(BUCKETS_MS) + 1  # buckets per api, +Inf included
_FIRST = BUCKETS_S[0]
MAX_KEY = 128  # api keys counted (higher ones are refused before any handler runs)
_perf = time.perf_counter


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics (`Produce`, `ListOffsets`, `ApiVersions`)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


# the layout of a key's row in RequestStats.rows: the queue, local and total histograms'
# buckets (the first of each implied), then the sums in seconds of the queue time, of the
# wait after the handler returned (a later answer's), and of the total time. The server
# writes these offsets as literals (a constant costs less than a variable on every
# request): they must stay so.
QUEUE, LOCAL, TOTAL, SUMS = 0, NB, 2 * NB, 3 * NB
SUM_QUEUE, SUM_WAIT, SUM_TOTAL = SUMS, SUMS + 1, SUMS + 2
assert (LOCAL, TOTAL, SUM_QUEUE, SUM_TOTAL) == (18, 36, 54, 56), \
    "Connection._dispatch's literal offsets"
ROW = SUMS + 3
# versions counted per key; ApiVersions answers any int16 version (with its error), so its
# row holds them all: a negative version indexes from the end, as i - 65536
VERSIONS = 64
_API_VERSIONS_KEY = int(ApiKey.API_VERSIONS)


class RequestStats:
    """Every API's counters for one node, and the slow-request threshold.

    `versions[key][version]` counts requests; `rows[key]` holds the bucket counts of the
    queue, local and total time histograms (QUEUE, LOCAL, TOTAL; their first buckets
    implied) and the sums in seconds (SUM_QUEUE, SUM_WAIT, SUM_TOTAL). One list per key: a
    request looks its key up once, then writes at constant offsets. `rare` is the total time
    from which a request needs more than its counts and sums: past the first bucket, or slow.
    """

    def __init__(self, slow_ms: int = -1) -> None:
        self.versions = [[0] * (1 << 16 if key == _API_VERSIONS_KEY else VERSIONS)
                         for key in range(MAX_KEY)]
        self.rows: list[list[Any]] = [[0] * SUMS + [0.0] * 3 for _ in range(MAX_KEY)]
        self.slow_s = slow_ms / 1000 if slow_ms >= 0 else float("inf")
        self.rare = min(BUCKETS_S[0], self.slow_s)

    def count(self, key: int, version: int) -> None:
        """A request of a version outside its key's row (only a Dispatcher that served such a
        version would call this): counted at the row's last version."""
        if not 0 <= key < MAX_KEY:
            return
        row = self.versions[key]
        row[version if -len(row) <= version < len(row) else len(row) - 1] += 1

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        """One answered request: received (read off the socket), started (handler called),
        handled (handler returned), done (answer ready); perf_counter seconds. The server
        does the same inline for an answer ready when its handler returns."""
        key = header[0]
        if not 0 <= key < MAX_KEY:
            return
        self.count(key, header[1])
        row = self.rows[key]
        row[SUM_TOTAL] += done - received
        row[SUM_QUEUE] += started - received
        if done != handled:
            row[SUM_WAIT] += done - handled
        if done - received > self.rare:
            self._past_first(header, row, started - received, handled - started,
                             done - received)

    def _past_first(self, header: Any, row: list[Any], queue: float, local: float,
                    total: float) -> None:
        if queue > _FIRST:
            row[QUEUE + bisect_left(BUCKETS_S, queue)] += 1
        if local > _FIRST:
            row[LOCAL + bisect_left(BUCKETS_S, local)] += 1
        if total > _FIRST:
            row[TOTAL + bisect_left(BUCKETS_S, total)] += 1
        if total > self.slow_s:
            self.slow(header, queue, local, total)

    def later(self, task: asyncio.Future[Any], header: Any, received: float, started: float,
              handled: float) -> None:
        """An answer that comes later (a task): recorded when it is ready."""
        def done(t: asyncio.Future[Any]) -> None:
            if t.cancelled() or t.exception() is not None:
                exc = None if t.cancelled() else t.exception()
                self.failed(header, received, str(exc) if exc else "cancelled")
                return
            self.record(header, received, started, handled, _perf())

        task.add_done_callback(done)

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
        at = {"queue": QUEUE, "local": LOCAL, "total": TOTAL}[kind]
        rest = self.rows[key][at + 1:at + NB]
        return [sum(self.versions[key]) - sum(rest), *rest]

    def seconds(self, kind: str, key: int) -> float:
        """The sum of `kind`'s observations for `key`, in seconds."""
        row = self.rows[key]
        if kind == "local":  # what was neither queue nor wait
            return max(0.0, float(row[SUM_TOTAL] - row[SUM_QUEUE] - row[SUM_WAIT]))
        return float(row[{"queue": SUM_QUEUE, "total": SUM_TOTAL}[kind]])


def bound_call(target: Any) -> Any:
    """What to call for `target`: an object's bound __call__, which the interpreter calls in
    the same frame loop as a Python function; the object itself goes through a C slot and
    a new frame loop (about 250 instructions more per call, measured with cachegrind)."""
    if isinstance(target, types.FunctionType | types.MethodType):
        return target
    return target.__call__
