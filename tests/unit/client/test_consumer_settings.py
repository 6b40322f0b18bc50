"""Every confluent-kafka consumer odradek creates starts from the shipped fetch settings, and
the user's own settings win. librdkafka itself reports what it was given (debug=conf logs the
client configuration when the consumer is created), so these read its word, not our dicts."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer

from odradek.client import consumer, consumer_settings
from odradek.client.consumer_settings import LIBRDKAFKA_DEFAULTS, SHIPPED, settings_text
from odradek.perf.confluent import consumer_config

NOWHERE = "127.0.0.1:1"  # nothing listens: the consumer is created, never connects


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def capture() -> Iterator[Callable[[str], _Lines]]:
    attached: list[tuple[logging.Logger, _Lines, int]] = []

    def on(name: str) -> _Lines:
        log = logging.getLogger(name)
        handler = _Lines()
        attached.append((log, handler, log.level))
        log.addHandler(handler)
        log.setLevel(logging.DEBUG)
        return handler

    yield on
    for log, handler, level in attached:
        log.removeHandler(handler)
        log.setLevel(level)


def librdkafka_conf(make: Callable[[], Consumer], handler: _Lines) -> dict[str, str]:
    """The configuration librdkafka logged for the consumer `make` creates (debug=conf)."""
    c = make()
    try:
        c.poll(0.2)  # log lines reach a Python logger from poll()
    finally:
        c.close()
    out: dict[str, str] = {}
    for line in handler.lines:
        _, sep, rest = line.partition("]:")
        key, eq, value = rest.partition(" = ")
        if sep and eq:
            out[key.strip()] = value.strip()
    assert out, "librdkafka logged no configuration"
    return out


def _shipped_in(conf: dict[str, str]) -> None:
    for key, value in SHIPPED.items():
        # librdkafka reports max.partition.fetch.bytes under its older name
        name = "fetch.message.max.bytes" if key == "max.partition.fetch.bytes" else key
        assert conf[name] == str(value), key


def test_shipped_values_differ_from_librdkafka_defaults() -> None:
    assert SHIPPED.keys() == LIBRDKAFKA_DEFAULTS.keys()
    assert SHIPPED["fetch.queue.backoff.ms"] < LIBRDKAFKA_DEFAULTS["fetch.queue.backoff.ms"]
    assert all(f"{k}={v}" in settings_text() for k, v in SHIPPED.items())


def test_factory_consumer_gets_shipped_settings(capture: Callable[[str], _Lines]) -> None:
    h = capture("probe-factory")
    conf = librdkafka_conf(lambda: consumer(NOWHERE, {"debug": "conf",
                                                      "logger": logging.getLogger("probe-factory")}),
                           h)
    _shipped_in(conf)


def test_user_setting_wins_in_factory(capture: Callable[[str], _Lines]) -> None:
    h = capture("probe-x")
    conf = librdkafka_conf(lambda: consumer(NOWHERE, {
        "debug": "conf", "logger": logging.getLogger("probe-x"),
        "fetch.queue.backoff.ms": "1000", "queued.min.messages": "7"}), h)
    assert conf["fetch.queue.backoff.ms"] == "1000"
    assert conf["queued.min.messages"] == "7"
    assert conf["queued.max.messages.kbytes"] == str(SHIPPED["queued.max.messages.kbytes"])


def test_librdkafka_defaults_switch_restores_them() -> None:
    conf = consumer_settings(NOWHERE, {"queued.min.messages": 3}, librdkafka_defaults=True)
    assert conf["fetch.queue.backoff.ms"] == 1000
    assert conf["queued.min.messages"] == 3


def test_bench_consumer_gets_shipped_settings_and_x_wins(
        capture: Callable[[str], _Lines]) -> None:
    h = capture("probe-bench")
    log = logging.getLogger("probe-bench")
    conf = librdkafka_conf(lambda: Consumer(consumer_config(NOWHERE, {"debug": "conf",
                                                                      "logger": log})), h)
    _shipped_in(conf)
    h.lines.clear()
    conf = librdkafka_conf(lambda: Consumer(consumer_config(
        NOWHERE, {"debug": "conf", "logger": log, "fetch.max.bytes": "1048576"})), h)
    assert conf["fetch.max.bytes"] == "1048576"
    assert conf["fetch.queue.backoff.ms"] == str(SHIPPED["fetch.queue.backoff.ms"])


def test_bench_librdkafka_defaults_are_librdkafkas(capture: Callable[[str], _Lines]) -> None:
    h = capture("probe-defaults")
    log = logging.getLogger("probe-defaults")
    conf = librdkafka_conf(lambda: Consumer(consumer_config(
        NOWHERE, {**LIBRDKAFKA_DEFAULTS, "debug": "conf", "logger": log})), h)
    assert conf["fetch.queue.backoff.ms"] == "1000"
    assert conf["queued.min.messages"] == "100000"
    assert conf["fetch.message.max.bytes"] == "1048576"


def test_spark_source_consumer_gets_shipped_settings(capture: Callable[[str], _Lines]) -> None:
    from odradek.spark.consume import consumer_conf

    h = capture("odradek.spark")
    conf = librdkafka_conf(lambda: Consumer(consumer_conf(
        {"bootstrap.servers": NOWHERE, "debug": "conf"})), h)
    _shipped_in(conf)
    h.lines.clear()
    conf = librdkafka_conf(lambda: Consumer(consumer_conf(
        {"bootstrap.servers": NOWHERE, "debug": "conf", "fetch.queue.backoff.ms": "20"})), h)
    assert conf["fetch.queue.backoff.ms"] == "20"
    assert conf["isolation.level"] == "read_committed"


def test_test_helpers_and_tool_defaults_keep_shipped_settings() -> None:
    conf = consumer_settings(NOWHERE, {"error_cb": print}, group_id="g", fetch_wait_max_ms=50)
    assert conf["group.id"] == "g" and conf["fetch.wait.max.ms"] == 50
    assert conf["error_cb"] is print  # overrides are taken as spelled
    assert all(conf[k] == v for k, v in SHIPPED.items())
