"""Every example's input generator, run as a user runs it: `python -m examples.<name>.generate`
with the `odradek` CLI's flag names (or ODRADEK_BOOTSTRAP), against a real node."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from examples.cdc_postgres import generator as cdc
from examples.clickstream import generator as clicks
from examples.enrichment import generator as enrich
from examples.fraud import generator as fraud

from tests.spark.support import create_topic, read_all, topic_name
from tests.support.broker import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir()
                  if p.is_dir() and (p / "__init__.py").exists())


def generate(name: str, args: list[str], env: dict[str, str] | None = None) -> str:
    base = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP"}
    res = subprocess.run([sys.executable, "-m", f"examples.{name}.generate", *args], cwd=ROOT,
                         env={**base, **(env or {})}, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def count(bootstrap: str, topic: str, partitions: int = 2) -> int:
    return len(read_all(bootstrap, topic, partitions, committed=False))


def test_every_example_has_a_generate_entry_point() -> None:
    assert EXAMPLES == ["cdc_postgres", "clickstream", "enrichment", "fraud", "lake_etl", "sql_pipeline"]
    for name in EXAMPLES:
        res = subprocess.run([sys.executable, "-m", f"examples.{name}.generate", "--help"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert f"python -m examples.{name}.generate" in res.stdout
        assert "-b HOST:PORT, --bootstrap-server HOST:PORT" in res.stdout, res.stdout


@pytest.mark.timeout(600)
def test_generators_produce_to_the_given_node(spark_broker: BrokerProcess) -> None:
    b = spark_broker.bootstrap

    # The address from ODRADEK_BOOTSTRAP, as the odradek commands take it.
    views = create_topic(b, topic_name("gen-views"), 2)
    out = generate("clickstream", ["--topic", views, "--users", "3", "--sessions", "2"],
                   env={"ODRADEK_BOOTSTRAP": b})
    assert count(b, views) == len(clicks.page_views(3, 2)), out

    orders, payments = create_topic(b, topic_name("gen-orders"), 2), create_topic(b, topic_name("gen-pay"), 2)
    generate("fraud", ["--bootstrap-server", b, "--orders", orders, "--payments", payments, "--count", "10"])
    want_orders, want_payments = fraud.generate(10)
    assert (count(b, orders), count(b, payments)) == (len(want_orders), len(want_payments))

    users, actions = topic_name("gen-users"), create_topic(b, topic_name("gen-actions"), 2)
    generate("enrichment", ["-b", b, "--users", users, "--events", actions, "--count", "15"])
    assert (count(b, users), count(b, actions)) == (len(enrich.profiles()), 15)

    changes = create_topic(b, topic_name("gen-cdc"), 2)
    out = generate("cdc_postgres", ["-b", b, "--topic", changes, "--count", "40"])
    assert count(b, changes) == len(list(cdc.changes(40))) == 40 and "40 change events" in out

    events = create_topic(b, topic_name("gen-events"), 2)
    # The generators' earlier flag is still taken.
    out = generate("lake_etl", ["--bootstrap", b, "--topic", events, "--count", "30"])
    assert count(b, events) == 30 and "30 events" in out

    pv = create_topic(b, topic_name("gen-pv"), 2)
    out = generate("sql_pipeline", ["-b", b, "--topic", pv, "--count", "50"])
    assert count(b, pv) == 50 and "produced 50 page views" in out and "expected:" in out
