"""The log of refused client requests: each refusal that is not routine, once, rate-limited.

An operator wants to see a client that sends what the node refuses (a malformed request,
an unsupported version, INVALID_CONFIG, INVALID_TOPIC_EXCEPTION, a policy violation ...)
with the client id, the API and the reason. Refusals that clients meet in normal work
(UNKNOWN_TOPIC_OR_PARTITION while a topic is auto-created, OFFSET_OUT_OF_RANGE,
REBALANCE_IN_PROGRESS, NOT_COORDINATOR, retriable leadership and load errors ...) are
only logged at DEBUG.

A hostile or broken client must not flood the log: one line per identical refusal
(client id, peer, API, error, reason) per `repeat_s`, counting the repeats it swallowed, and at most `burst` lines
(refilled at `rate` per second) overall, with the number of lines dropped reported on
the next line that gets through.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger("odradek.refusals")

E = ErrorCode
# errors clients meet in normal operation and retry or handle themselves
ROUTINE = frozenset(int(c) for c in (
    E.none, E.unknown_topic_or_partition, E.unknown_topic_id, E.offset_out_of_range,
    E.leader_not_available, E.not_leader_or_follower, E.fenced_leader_epoch,
    E.unknown_leader_epoch, E.replica_not_available, E.request_timed_out,
    E.not_enough_replicas, E.not_enough_replicas_after_append, E.kafka_storage_error,
    E.coordinator_load_in_progress, E.coordinator_not_available, E.not_coordinator,
    E.not_controller, E.rebalance_in_progress, E.illegal_generation, E.unknown_member_id,
    E.member_id_required, E.stale_member_epoch, E.fenced_member_epoch,
    E.group_id_not_found, E.unstable_offset_commit, E.offset_not_available,
    E.concurrent_transactions, E.producer_fenced, E.invalid_producer_epoch,
    E.transaction_coordinator_fenced, E.unknown_producer_id, E.duplicate_sequence_number,
    E.transactional_id_not_found, E.topic_already_exists, E.throttling_quota_exceeded,
    E.fetch_session_id_not_found, E.invalid_fetch_session_epoch, E.election_not_needed,
    E.preferred_leader_not_available, E.no_reassignment_in_progress, E.operation_not_attempted,
    E.transaction_abortable, E.rebootstrap_required,
))


def api_name(api_key: int, version: int | None = None) -> str:
    """`PRODUCE v7`: the API as Kafka names it, with the request's version."""
    try:
        name = ApiKey(api_key).name
    except ValueError:
        name = f"api key {api_key}"
    return name if version is None else f"{name} v{version}"


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


MAX_REASON = 400


class RefusalLog:
    """Logs refusals with a per-key repeat window and a global line budget."""

    def __init__(self, logger: logging.Logger = log, repeat_s: float = 60.0, burst: int = 100,
                 rate: float = 2.0, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.repeat_s = repeat_s
        self.burst = burst
        self.rate = rate
        self.max_keys = max_keys
        self.clock = clock
        self._tokens = float(burst)
        self._refilled = clock()
        self._dropped = 0  # lines the global budget swallowed since the last line
        # key -> (time logged, repeats swallowed since); bounded so that varying client
        # ids cannot grow it without end
        self._keys: collections.OrderedDict[tuple[Any, ...], list[float]] = (
            collections.OrderedDict())

    def refused(self, client_id: str | None, api: str, error: str, reason: str | None = None,
                peer: str | None = None) -> bool:
        """Log one refusal unless rate-limited; True when a line was written."""
        if not self.logger.isEnabledFor(logging.INFO):
            return False
        if reason is not None and len(reason) > MAX_REASON:
            # client-supplied names can be long: the line and the key stay small
            reason = reason[:MAX_REASON] + f"... ({len(reason) - MAX_REASON} more chars)"
        if client_id is not None and len(client_id) > MAX_REASON:
            client_id = client_id[:MAX_REASON] + "..."
        now = self.clock()
        # the same refusal repeated (a client retrying what cannot succeed) is one line per
        # window; refusals that differ, or come on a new connection, get their own line
        # within the global budget
        key = (client_id, peer, api, error, reason)
        seen = self._keys.get(key)
        if seen is not None and now - seen[0] < self.repeat_s:
            seen[1] += 1
            return False
        self._tokens = min(float(self.burst), self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens < 1.0:
            self._dropped += 1
            return False
        self._tokens -= 1.0
        repeats = int(seen[1]) if seen is not None else 0
        self._keys[key] = [now, 0]
        self._keys.move_to_end(key)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)
        extra = []
        if repeats:
            extra.append(f"{repeats} more like it since the last line")
        if self._dropped:
            extra.append(f"{self._dropped} other refusals not logged (rate limit)")
            self._dropped = 0
        self.logger.info("refused %s from client %r%s: %s%s%s", api, client_id,
                         f" at {peer}" if peer else "", error, f": {reason}" if reason else "",
                         f" ({'; '.join(extra)})" if extra else "")
        return True

    def response(self, header: Any, values: dict[str, Any]) -> None:
        """Count every error code in a response's plain values (errors_total) and log the
        non-routine ones: one line per response."""
        errors: list[int] = []
        found = _refusals(values, errors)
        if not errors:
            return
        count_codes(header.api_key, errors)
        if not found:
            return
        if header.api_key == ApiKey.API_VERSIONS and found[0][0] == E.unsupported_version:
            return  # clients probe ApiVersions with their newest version: routine
        codes = list(dict.fromkeys(error_name(code) for code, _ in found))
        details = [d for _, d in found[:MAX_DETAILS] if d]
        if len(found) > MAX_DETAILS:
            details.append(f"and {len(found) - MAX_DETAILS} more")
        self.refused(header.client_id, api_name(header.api_key, header.api_version),
                     ", ".join(codes), "; ".join(details) or None)


# a response refusing many things (a hostile CreateTopics of 10000 names) stays one short line
MAX_DETAILS = 10
_SUBJECT_KEYS = ("name", "topic", "group_id", "resource_name", "transactional_id")


def _refusals(values: dict[str, Any], errors: list[int]) -> list[tuple[int, str | None]]:
    """(code, what and why) of every non-routine error code, in the response's order; every
    error code other than NONE is appended to `errors` (the routine ones too)."""
    found: list[tuple[int, str | None]] = []
    stack: list[dict[str, Any]] = [values]
    while stack:
        entry = stack.pop()
        code = entry.get("error_code")
        if code and isinstance(code, int):
            errors.append(int(code))
        if code and isinstance(code, int) and int(code) not in ROUTINE:
            # what was refused (a topic, group or resource name) and why, where the
            # response says so
            subject = next((entry[k] for k in _SUBJECT_KEYS if entry.get(k)), None)
            message = entry.get("error_message")
            about = f"{subject!r}" if subject is not None else None
            found.append((int(code), ": ".join(x for x in (about, message) if x) or None))
        children: list[dict[str, Any]] = []
        for value in entry.values():
            if type(value) is list:
                children.extend(v for v in value if type(v) is dict)
            elif type(value) is dict:
                children.append(value)
        stack.extend(reversed(children))
    return found


REFUSALS = RefusalLog()
# errors_total (Kafka's RequestMetrics ErrorsPerSec, by request and error): (API name as
# ApiKey spells it, error name) -> how often a response carried that code (each partition's,
# topic's or resource's code counts, as Kafka's AbstractResponse.errorCounts), plus the
# refusals answered by closing the connection. NONE is not counted here: the success path
# must not pay for it. ERRED[api key] counts the answered responses that carried a code other
# than NONE, and the collector gives NONE as the API's answered requests less those (one per
# response: a response with both NONE and other codes counts only its other codes). One node
# per process, as `odradek serve` runs.
ERRORS: dict[tuple[str, str], int] = {}
ERRED: dict[int, int] = {}


def _count(api: str, error: str) -> None:
    key = (api.partition(" ")[0], error)
    ERRORS[key] = ERRORS.get(key, 0) + 1


def count_codes(api_key: int, codes: Iterable[int], answered: bool = True) -> None:
    """The error codes one response carries (NONEs are skipped): the handlers call this only
    when they know a response holds an error, so a successful request never gets here.
    `answered`: False when the response is never sent (acks=0), so NONE's count stays right."""
    api = api_name(api_key)
    erred = False
    for code in codes:
        if code:
            erred = True
            key = (api, error_name(code))
            ERRORS[key] = ERRORS.get(key, 0) + 1
    if erred and answered:
        ERRED[api_key] = ERRED.get(api_key, 0) + 1


def refused(client_id: str | None, api: str, error: str, reason: str | None = None,
            peer: str | None = None) -> bool:
    """Log a refusal through the node's one RefusalLog, and count it: these refusals close
    the connection, no response carries their code."""
    _count(api, error)
    return REFUSALS.refused(client_id, api, error, reason, peer)


def note(header: Any, code: int, reason: str | None = None) -> None:
    """A handler's refusal with `code`: logged if not routine (DEBUG otherwise). Counted where
    the response carrying it is (common.respond, or the handler's own encoder's caller)."""
    if int(code) in ROUTINE:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s from client %r: %s%s", api_name(header.api_key, header.api_version), header.client_id,
                      error_name(code), f": {reason}" if reason else "")
        return
    REFUSALS.refused(header.client_id, api_name(header.api_key, header.api_version), error_name(code), reason)
