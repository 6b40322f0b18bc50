"""Client quotas, as Kafka's ClientQuotaManager applies them (sans-I/O: the caller gives the
clock and does the muting).

Quotas live in the metadata image (ClientQuotaRecord): entity -> key -> value, where an entity
is a user, a client id, or both, and a name of None is that type's default. For a request
from (user, client id) the quota is the first entity that has the key, in Kafka's order:

    user+client, user+default client, user, default user+client,
    default user+default client, default user, client, default client

and the rate it is measured against is shared by everything that resolves to the same level
(a `user` quota: all of that user's clients together; a default: each user or client id on
its own), as Kafka's quota metric tags do.

A rate is measured over `quota.window.num` samples of `quota.window.size.seconds` (Kafka's
SampledStat Rate: the window is at least samples-1 sample spans long). When recording makes
the rate exceed the quota, the throttle time is what it takes for the rate to fall back to
the quota: (rate - quota) / quota * window, capped at the whole window. The broker answers at
once with that throttle_time_ms and mutes the channel for as long (KIP-219).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

__all__ = [
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "PRODUCER_BYTE_RATE",
    "REQUEST_PERCENTAGE",
    "ClientQuotas",
    "Rate",
    "resolve_quota",
]

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
USER, CLIENT_ID = "user", "client-id"

Entity = tuple[tuple[str, str | None], ...]
# a sensor: (quota key, user tag, client-id tag); "" where the level does not name it
SensorKey = tuple[str, str, str]


class Rate:
    """A windowed rate (per second) of recorded values: Kafka's SampledStat over `samples`
    spans of `span_ms`."""

    __slots__ = ("_samples", "last_ms", "samples", "span_ms")

    def __init__(self, samples: int, span_ms: int) -> None:
        self.samples = samples
        self.span_ms = span_ms
        self._samples: list[list[float]] = []  # [start ms, total]
        self.last_ms = 0.0

    def _purge(self, now_ms: float) -> None:
        # a sample as old as the whole window is gone (Kafka's purgeObsoleteSamples)
        expire = self.samples * self.span_ms
        while self._samples and now_ms - self._samples[0][0] >= expire:
            self._samples.pop(0)

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        self.last_ms = now_ms
        if self._samples and now_ms < self._samples[-1][0] + self.span_ms:
            self._samples[-1][1] += value
            return
        self._samples.append([now_ms, value])
        if len(self._samples) > self.samples:
            self._samples.pop(0)

    def window_ms(self, now_ms: float) -> float:
        """The span the rate divides by: since the oldest sample, at least samples-1 spans
        (so a new client's first burst is spread over the whole window, as in Kafka)."""
        self._purge(now_ms)
        oldest = self._samples[0][0] if self._samples else now_ms
        return max(now_ms - oldest, (self.samples - 1) * self.span_ms, 1.0)

    def measure(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(s[1] for s in self._samples)
        return total * 1000.0 / self.window_ms(now_ms)


def resolve_quota(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
                  client_id: str) -> tuple[float, SensorKey] | None:
    """The quota that applies to (user, client id) for `key` and the sensor it is measured
    on, or None (no quota: unlimited)."""
    candidates: tuple[tuple[Entity, str, str], ...] = (
        (((CLIENT_ID, client_id), (USER, user)), user, client_id),
        (((CLIENT_ID, None), (USER, user)), user, client_id),
        (((USER, user),), user, ""),
        (((CLIENT_ID, client_id), (USER, None)), user, client_id),
        (((CLIENT_ID, None), (USER, None)), user, client_id),
        (((USER, None),), user, ""),
        (((CLIENT_ID, client_id),), "", client_id),
        (((CLIENT_ID, None),), "", client_id),
    )
    for entity, user_tag, client_tag in candidates:
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], (key, user_tag, client_tag)
    return None


class ClientQuotas:
    """The node's quota sensors over the quotas of the current image (`quotas_source()`)."""

    IDLE_MS = 3_600_000  # a sensor unused this long is dropped (Kafka's inactive sensor expiry)

    def __init__(self, quotas_source: Callable[[], Mapping[Entity, Mapping[str, float]]],
                 samples: int = 11, span_ms: int = 1000,
                 clock: Callable[[], float] | None = None) -> None:
        self._source = quotas_source
        self.samples = samples
        self.span_ms = span_ms
        self._clock = clock or (lambda: time.monotonic() * 1000.0)
        self._sensors: dict[SensorKey, Rate] = {}
        self._next_sweep = 0.0
        # whether any quota exists: a plain attribute, read on every request's path, kept
        # by refresh() as the image changes (the broker calls it from a metadata listener)
        self.active = False

    def refresh(self, quotas: Mapping[Entity, Mapping[str, float]] | None = None) -> None:
        self.active = bool(self._source() if quotas is None else quotas)

    def now_ms(self) -> float:
        return self._clock()

    def _sensor(self, sensor: SensorKey, now_ms: float) -> Rate:
        rate = self._sensors.get(sensor)
        if rate is None:
            if now_ms >= self._next_sweep:
                self._next_sweep = now_ms + self.IDLE_MS
                idle = [k for k, r in self._sensors.items() if now_ms - r.last_ms > self.IDLE_MS]
                for k in idle:
                    del self._sensors[k]
            rate = self._sensors[sensor] = Rate(self.samples, self.span_ms)
        return rate

    def record(self, key: str, user: str, client_id: str, value: float,
               now_ms: float | None = None) -> int:
        """Record `value` against the quota that applies; the throttle time in ms (0: within
        the quota, or no quota)."""
        found = resolve_quota(self._source(), key, user, client_id)
        if found is None:
            return 0
        quota, sensor = found
        now = self._clock() if now_ms is None else now_ms
        rate = self._sensor(sensor, now)
        rate.record(value, now)
        return self._throttle(rate, quota, now)

    def unrecord(self, key: str, user: str, client_id: str, value: float,
                 now_ms: float | None = None) -> None:
        """Take back a recorded value (a throttled fetch is answered empty, as Kafka)."""
        found = resolve_quota(self._source(), key, user, client_id)
        if found is not None:
            now = self._clock() if now_ms is None else now_ms
            self._sensor(found[1], now).record(-value, now)

    def throttle_ms(self, key: str, user: str, client_id: str,
                    now_ms: float | None = None) -> int:
        """The throttle time the current rate calls for, without recording."""
        found = resolve_quota(self._source(), key, user, client_id)
        if found is None:
            return 0
        now = self._clock() if now_ms is None else now_ms
        return self._throttle(self._sensor(found[1], now), found[0], now)

    def _throttle(self, rate: Rate, quota: float, now_ms: float) -> int:
        measured = rate.measure(now_ms)
        if measured <= quota:
            return 0
        window = rate.window_ms(now_ms)
        return int(min(round((measured - quota) / quota * window),
                       self.samples * self.span_ms))
