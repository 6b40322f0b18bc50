"""The librdkafka settings every confluent-kafka consumer odradek creates starts from.

librdkafka prefetches into a local queue until it holds `queued.min.messages` or
`queued.max.messages.kbytes` (with 100 B records the 100,000 records, 10 MB, come first), then
stops fetching for `fetch.queue.backoff.ms` (1000 ms by default since librdkafka 2.3). A node
that fills the queue in a fraction of a second leaves the consumer idle for the rest of that
second: the debug log shows "Fetch backoff for 1000ms: Local: Queue full" once per queue. The
values below were chosen by a sweep (bench/consumer_settings.py; figures in bench/RESULTS.md,
issue 23); a user's own settings (`-X key=value`, Spark options) are applied after them and
always win.
"""

from __future__ import annotations

from collections.abc import Mapping

from odradek.client.config import client_config

# Chosen by bench/consumer_settings.py (bench/RESULTS.md, issue 23): only the backoff moves.
# A queue-full backoff of 1000 ms cut a confluent-kafka read of 3M x 100 B from 2.1M to 0.18M
# records/s on a quiet machine; 1-20 ms read alike, 100 ms lost 40%. Bigger queues and
# fetches (128-512 MB, 4-32 MB per partition) were slower, not faster: librdkafka parses each
# response whole before the application sees a record. The sizes are pinned anyway, so a new librdkafka default does not
# move them unseen. The backoff only applies while the local queue is full: an idle consumer
# (empty queue) never waits on it, and measured the same CPU and wake-ups at 1, 5 and 1000 ms.
SHIPPED: dict[str, object] = {
    "fetch.queue.backoff.ms": 5,
    "queued.min.messages": 100_000,
    "queued.max.messages.kbytes": 65_536,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
}

# librdkafka 2.x's own defaults for the same keys: `--librdkafka-defaults` applies these to
# show what the shipped values change.
LIBRDKAFKA_DEFAULTS: dict[str, object] = {
    "fetch.queue.backoff.ms": 1000,
    "queued.min.messages": 100_000,
    "queued.max.messages.kbytes": 65_536,
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 1_048_576,
}


def settings_text(settings: Mapping[str, object] | None = None) -> str:
    """Settings (the shipped ones by default) as `key=value, ...`, for --help and reports."""
    return ", ".join(f"{k}={v}" for k, v in (SHIPPED if settings is None else settings).items())


def consumer_settings(bootstrap: str | None = None,
                      overrides: Mapping[str, object] | None = None,
                      *, librdkafka_defaults: bool = False,
                      **defaults: object) -> dict[str, object]:
    """A consumer's librdkafka settings: the shipped fetch settings, then the tool's own
    defaults (dots spelled as underscores: group id, auto commit, ...), then the user's
    overrides. With `librdkafka_defaults` the fetch keys are librdkafka's own defaults."""
    base = LIBRDKAFKA_DEFAULTS if librdkafka_defaults else SHIPPED
    conf = client_config(bootstrap, None, **defaults)
    merged: dict[str, object] = {"bootstrap.servers": conf.pop("bootstrap.servers"), **base}
    merged.update(conf)
    if overrides:
        merged.update(overrides)
    return merged


def with_shipped(conf: Mapping[str, object]) -> dict[str, object]:
    """A complete consumer config built elsewhere (its keys win) on top of the shipped ones:
    for callers that assemble their own dict, e.g. the Spark source from its options."""
    return {**SHIPPED, **conf}
