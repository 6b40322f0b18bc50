"""examples/cdc_postgres: change events applied to a real PostgreSQL, exactly once.

The expected table is the generated changes replayed here in plain Python, in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from examples.cdc_postgres.changes import CUSTOMERS
from examples.cdc_postgres.generator import Change, changes, produce
from examples.cdc_postgres.pipeline import start
from examples.cdc_postgres.postgres_writer import PROGRESS_TABLE, PostgresBatchWriter
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.spark.checkpoints import forget_last_commit
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess
from tests.support.postgres import PostgresServer

PARTITIONS = 3
COUNT = 600
AVAILABLE_NOW = {"availableNow": True}
SOURCE = {"maxOffsetsPerTrigger": "300"}


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()


def replay(generated: list[Change]) -> dict[int, tuple[Any, ...]]:
    """The table after applying every change in order: what the pipeline must end with."""
    table: dict[int, tuple[Any, ...]] = {}
    for change in generated:
        pk = json.loads(change.key)["id"]
        envelope = json.loads(change.value) if change.value is not None else {"op": "d"}
        if envelope["op"] == "d":
            table.pop(pk, None)
        else:
            after = envelope["after"]
            table[pk] = tuple(after[n] for n in CUSTOMERS.names)
    return table


def table_rows(dsn: str) -> dict[int, tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, name, email, tier, balance_cents FROM customers").fetchall()
    return {r[0]: tuple(r) for r in rows}


def progress(dsn: str) -> dict[str, tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT app_id, last_batch_id, batches_applied, changes_applied, applied_at "
                            f"FROM {PROGRESS_TABLE}").fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def run(spark: SparkSession, bootstrap: str, topic: str, dsn: str, cp: Path,
        writer: PostgresBatchWriter) -> StreamingQuery:
    query = start(spark, bootstrap, topic, dsn, cp, trigger=AVAILABLE_NOW, source_options=SOURCE,
                  writer=writer)
    try:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
        assert not query.isActive
    finally:
        query.stop()
    return query


def test_changes_applied_once_across_a_re_executed_batch(spark: SparkSession, spark_broker: BrokerProcess,
                                                         postgres: PostgresServer, tmp_path: Path) -> None:
    dsn = postgres.create_database("cdc_once")
    topic = create_topic(spark_broker.bootstrap, topic_name("cdc"), PARTITIONS)
    generated = list(changes(COUNT, seed=5))
    produce(spark_broker.bootstrap, topic, generated, PARTITIONS)
    want = replay(generated)
    # The data exercises what the writer must get right: deletes, tombstones, keys that come
    # back after a delete, NULL columns.
    assert any(c.value is None for c in generated)
    assert 0 < len(want) < len({c.pk for c in generated})
    assert any(row[2] is None for row in want.values())

    cp = tmp_path / "cp"
    writer = PostgresBatchWriter(dsn)
    query = run(spark, spark_broker.bootstrap, topic, dsn, cp, writer)
    app = f"odradek-cdc-{query.id}"
    assert len(writer.calls) >= 2 and writer.applied == writer.calls and not writer.skipped
    assert table_rows(dsn) == want
    before = progress(dsn)
    assert before[app][:2] == (writer.calls[-1], len(writer.calls))
    # Each batch was reduced to one change per key, so fewer changes than records were applied.
    assert before[app][2] < COUNT

    # Spark re-executes the last batch: the writer sees its id again and PostgreSQL is untouched.
    last = forget_last_commit(cp)
    writer = PostgresBatchWriter(dsn)
    rerun = run(spark, spark_broker.bootstrap, topic, dsn, cp, writer)
    assert rerun.id == query.id
    assert writer.calls == writer.skipped == [last] and not writer.applied
    assert progress(dsn) == before
    assert table_rows(dsn) == want

    # The control: the same re-executed batch under an app id PostgreSQL has not seen is applied.
    assert forget_last_commit(cp) == last
    writer = PostgresBatchWriter(dsn, app_id="another-app")
    run(spark, spark_broker.bootstrap, topic, dsn, cp, writer)
    assert writer.applied == [last]
    assert progress(dsn)["another-app"][:2] == (last, 1)
    assert table_rows(dsn) == want


def test_a_change_that_cannot_be_applied_fails_the_query(spark: SparkSession, spark_broker: BrokerProcess,
                                                         postgres: PostgresServer, tmp_path: Path) -> None:
    dsn = postgres.create_database("cdc_bad")
    topic = create_topic(spark_broker.bootstrap, topic_name("cdc-bad"), 1)
    good = list(changes(5, seed=9))
    bad = Change(b'{"id": 1}', json.dumps({"op": "x", "before": None, "after": None}).encode(), 1)
    produce(spark_broker.bootstrap, topic, [*good, bad], 1)
    writer = PostgresBatchWriter(dsn)
    query = start(spark, spark_broker.bootstrap, topic, dsn, tmp_path / "cp", trigger=AVAILABLE_NOW,
                  writer=writer)
    try:
        with pytest.raises(StreamingQueryException) as failed:
            query.awaitTermination(120)
    finally:
        query.stop()
    assert "unknown op" in str(failed.value) and "partition 0 offset 5" in str(failed.value)
    assert not writer.applied
    assert table_rows(dsn) == {}
