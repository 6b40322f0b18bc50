"""The CLI's consumers run with the shipped fetch settings, and `-X` wins: read from
librdkafka's own report of its configuration (`-X debug=conf`), against a real node."""

from __future__ import annotations

import re

from odradek.client.consumer_settings import SHIPPED
from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess


def reported(stderr: str) -> dict[str, str]:
    conf = dict(re.findall(r"\]:\s+([a-z.]+) = (\S+)", stderr))
    assert conf, stderr
    return conf


def librdkafka_name(key: str) -> str:
    return "fetch.message.max.bytes" if key == "max.partition.fetch.bytes" else key


def test_consume_applies_shipped_settings_and_x_wins(broker: BrokerProcess) -> None:
    ok("topic", "create", "cs", "-p", "1", bootstrap=broker.bootstrap)
    res = odradek("consume", "cs", "-e", "-X", "debug=conf", bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    conf = reported(res.stderr)
    for key, value in SHIPPED.items():
        assert conf[librdkafka_name(key)] == str(value), key
    res = odradek("consume", "cs", "-e", "-X", "debug=conf", "-X", "fetch.queue.backoff.ms=250",
                  bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    assert reported(res.stderr)["fetch.queue.backoff.ms"] == "250"


def test_bench_consume_librdkafka_defaults_switch(broker: BrokerProcess) -> None:
    ok("bench", "produce", "-t", "bs", "-n", "100", "-p", "1", bootstrap=broker.bootstrap)
    res = odradek("bench", "consume", "-t", "bs", "-n", "100", "-X", "debug=conf",
                  bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    assert reported(res.stderr)["fetch.queue.backoff.ms"] == str(SHIPPED["fetch.queue.backoff.ms"])
    res = odradek("bench", "consume", "-t", "bs", "-n", "100", "--librdkafka-defaults",
                  "-X", "debug=conf", "-X", "queued.min.messages=7", bootstrap=broker.bootstrap)
    assert res.returncode == 0, res.stderr
    conf = reported(res.stderr)
    assert conf["fetch.queue.backoff.ms"] == "1000"
    assert conf["queued.min.messages"] == "7"
