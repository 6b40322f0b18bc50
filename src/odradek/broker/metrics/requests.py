"""Per-API request counts and latency histograms, recorded in C (`_record.c`).

The server (broker.server.Connection) records each request right after its handler: that
runs once per request on the event loop and is the metrics' cost on the hot path (issue 18:
under 3% of the node's CPU per request). Written in Python, however few its bytecodes,
the timing block cost a pipelined 1-record produce ~4% of its interpreter instructions
(bench/RESULTS.md, issue 18), so it is one call into a C extension of ours: a `Timer` per
connection (`mark_read()` per read, `record(header)` per answer: the clock read, the
version count, the sums, the buckets, the slow log's check), counting into the node's
`Table` of C integers. The collector turns the table into Kafka's
`kafka_network_requestmetrics_*` families at scrape time (`apis`, `buckets`, `seconds`).

What is implied instead of counted: the first bucket of each histogram (a key's request
count less its other buckets) and the local time's sum (the total's less the queue's and
the wait's). A request's queue time is from the read that brought it to its handler's
start, where the previous request of the read ended.

There is no Python path beside the C one: without the built extension the node does not
import (`make setup` builds it; pip install -e . does). tests/unit/broker/
test_request_record.py holds the arithmetic's pure-Python reference and compares.
"""

from __future__ import annotations

import asyncio
import logging
import time
import types
from typing import Any

from odradek.broker.refusals import api_name
from odradek.protocol.apis import ApiKey

try:
    from odradek.broker.metrics._record import BUCKETS_MS as _C_BUCKETS_MS
    from odradek.broker.metrics._record import MAX_KEY, Table
    from odradek.broker.metrics._record import Timer as Timer  # the server's, one per connection
except ImportError as exc:  # no silent fallback: the timing exists only in C
    raise ImportError(
        "odradek.broker.metrics._record, the C extension that records the request metrics "
        "(src/odradek/broker/metrics/_record.c), is not built: run `make setup` (or `pip "
        "install -e .`, which needs gcc and the Python headers)") from exc

log = logging.getLogger("odradek.requests")

# upper bounds in ms of the latency histograms (the last bucket is +Inf)
BUCKETS_MS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0,
                                 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0)
if _C_BUCKETS_MS != BUCKETS_MS:  # a stale build of an older _record.c
    raise ImportError("odradek.broker.metrics._record counts other buckets than "
                      "BUCKETS_MS: rebuild it (make setup)")
BUCKETS_S = tuple(b / 1000 for b in BUCKETS_MS)  # in seconds, as _record.c computes them
NB = len(BUCKETS_MS) + 1  # buckets per api, +Inf included
_perf = time.perf_counter


def request_name(api_key: int) -> str:
    """Kafka's request name in RequestMetrics (`Produce`, `ListOffsets`, `ApiVersions`)."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"ApiKey{api_key}"


# the layout of Table.row(key): the queue, local and total histograms' buckets (the first
# of each implied, 0), then the sums in seconds of the queue time, of the wait after the
# handler returned (a later answer's), and of the total time
QUEUE, LOCAL, TOTAL, SUMS = 0, NB, 2 * NB, 3 * NB
SUM_QUEUE, SUM_WAIT, SUM_TOTAL = SUMS, SUMS + 1, SUMS + 2
ROW = SUMS + 3


class RequestStats:
    """Every API's counters for one node (`table`, in C), and the slow-request threshold.

    Servers time their connections' requests into `table` with a `Timer(stats.table)`
    each; the rest is read at scrape time or happens rarely (a later answer, a slow or a
    failed request).
    """

    def __init__(self, slow_ms: int = -1) -> None:
        self.slow_s = slow_ms / 1000 if slow_ms >= 0 else float("inf")
        self.table = Table(self.slow_s, self.slow)

    def count(self, key: int, version: int) -> None:
        """A request counted, not timed (a version outside its key's row counts at the
        row's last version)."""
        self.table.count(key, version)

    def record(self, header: Any, received: float, started: float, handled: float,
               done: float) -> None:
        """One answered request: received (read off the socket), started (handler called),
        handled (handler returned), done (answer ready); perf_counter seconds."""
        self.table.record(header, received, started, handled, done)

    def later(self, task: asyncio.Future[Any], header: Any, received: float, started: float,
              handled: float) -> None:
        """An answer that comes later (a task): recorded when it is ready."""
        def done(t: asyncio.Future[Any]) -> None:
            if t.cancelled() or t.exception() is not None:
                exc = None if t.cancelled() else t.exception()
                self.failed(header, received, str(exc) if exc else "cancelled")
                return
            self.table.record(header, received, started, handled, _perf())

        task.add_done_callback(done)

    def slow(self, header: Any, queue: float, local: float, total: float) -> None:
        """Called by the table for a request over request.slow.log.ms."""
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
        for key in range(MAX_KEY):
            versions = self.table.versions(key)
            if versions:
                out.append((key, versions))
        return out

    def buckets(self, kind: str, key: int) -> list[int]:
        """Bucket counts (not cumulative) of `kind` ("queue", "local", "total") for `key`."""
        at = {"queue": QUEUE, "local": LOCAL, "total": TOTAL}[kind]
        rest = self.table.row(key)[at + 1:at + NB]
        return [sum(self.table.versions(key).values()) - sum(rest), *rest]

    def seconds(self, kind: str, key: int) -> float:
        """The sum of `kind`'s observations for `key`, in seconds."""
        row = self.table.row(key)
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
