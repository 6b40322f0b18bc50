"""examples/lake_etl: JSON events to date-partitioned Parquet and to Delta, exactly once.

Expected rows come from the generator's events, with the UTC date computed here in Python.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from examples.lake_etl.delta import DeltaBatchWriter
from examples.lake_etl.generator import events, produce
from examples.lake_etl.pipeline import start_delta, start_parquet
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from tests.spark.checkpoints import batches_run, committed_batches, forget_last_commit
from tests.spark.support import create_topic, topic_name
from tests.support.broker import BrokerProcess

COUNT = 500
PARTITIONS = 3
PER_TRIGGER = "200"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
AVAILABLE_NOW = {"availableNow": True}
Row = tuple[str, int, str, Decimal | None, int, date]


def expected_rows(generated: list[dict[str, object]]) -> Counter[Row]:
    rows: Counter[Row] = Counter()
    for e in generated:
        at = datetime.fromisoformat(str(e["ts"])).astimezone(UTC)
        millis = (at - EPOCH) // timedelta(milliseconds=1)
        rows[(str(e["event_id"]), int(e["user_id"]), str(e["kind"]), e["amount"], millis,  # type: ignore[call-overload]
              at.date())] += 1
    return rows


def finish(query: StreamingQuery) -> dict[int, int]:
    try:
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
        assert not query.isActive
    finally:
        query.stop()
    return batches_run([_as_dict(p) for p in query.recentProgress])


def _as_dict(progress: object) -> dict[str, object]:
    return progress if isinstance(progress, dict) else json.loads(progress.json)  # type: ignore[attr-defined]


def parquet_rows(spark: SparkSession, path: Path) -> Counter[Row]:
    df = spark.read.parquet(str(path)).select(
        "event_id", "user_id", "kind", "amount", F.unix_millis("event_time").alias("ms"), "date")
    return Counter((r.event_id, r.user_id, r.kind, r.amount, r.ms, r.date) for r in df.collect())


def logged_files(path: Path) -> list[Path]:
    """The data files the file sink's log says were committed (not what lies on disk)."""
    files: list[Path] = []
    for entry in sorted((path / "_spark_metadata").iterdir()):
        if entry.name.startswith("."):
            continue
        lines = entry.read_text().splitlines()
        assert lines[0] == "v1", lines[0]
        files += [Path(json.loads(line)["path"].removeprefix("file:")) for line in lines[1:]]
    return files


def delta_rows(uri: Path) -> Counter[Row]:
    table = DeltaTable(str(uri)).to_pyarrow_table()
    ms = table.column("event_time").cast("int64").to_pylist()  # microseconds since the epoch
    cols = [table.column(n).to_pylist() for n in ("event_id", "user_id", "kind", "amount", "date")]
    return Counter((eid, uid, kind, amt, us // 1000, d) for (eid, uid, kind, amt, d), us
                   in zip(zip(*cols, strict=True), ms, strict=True))


@pytest.fixture(scope="module")
def loaded(spark_broker: BrokerProcess) -> tuple[str, list[dict[str, object]]]:
    topic = create_topic(spark_broker.bootstrap, topic_name("lake-events"), PARTITIONS)
    generated = list(events(COUNT, seed=11))
    produce(spark_broker.bootstrap, topic, generated, PARTITIONS)
    return topic, generated


def test_parquet_partitioned_by_utc_date_exactly_once(spark: SparkSession, spark_broker: BrokerProcess,
                                                      loaded: tuple[str, list[dict[str, object]]],
                                                      tmp_path: Path) -> None:
    topic, generated = loaded
    want = expected_rows(generated)
    out, cp = tmp_path / "parquet", tmp_path / "cp"
    opts = {"maxOffsetsPerTrigger": PER_TRIGGER}

    first = finish(start_parquet(spark, spark_broker.bootstrap, topic, out, cp,
                                 trigger=AVAILABLE_NOW, source_options=opts))
    assert sum(first.values()) == COUNT and len(first) >= 3, first

    # Row counts per date partition, read from the files the sink's log lists, without Spark.
    per_dir = Counter[str]()
    for f in logged_files(out):
        assert f.parent.parent == out, f
        per_dir[f.parent.name] += pq.read_metadata(f).num_rows
    assert per_dir == Counter({f"date={d.isoformat()}": n for d, n in
                               Counter(row[5] for row in want.elements()).items()})
    assert parquet_rows(spark, out) == want
    files_before = sorted(out.rglob("*.parquet"))
    assert sorted(logged_files(out)) == files_before

    # Re-execute the last batch: the file sink finds it in its log and writes nothing.
    last = forget_last_commit(cp)
    again = finish(start_parquet(spark, spark_broker.bootstrap, topic, out, cp,
                                 trigger=AVAILABLE_NOW, source_options=opts))
    # Batch `last` ran again (its progress was reported and its commit rewritten); the file
    # sink skips a batch already in its log without even running the plan, so it read 0 rows.
    assert set(again) == {last}, (again, first)
    assert committed_batches(cp)[-1] == last
    # Data files never change once written: the same files, the same log, the same rows.
    assert sorted(out.rglob("*.parquet")) == files_before
    assert sorted(logged_files(out)) == files_before


def test_delta_table_appends_each_batch_once(spark: SparkSession, spark_broker: BrokerProcess,
                                             loaded: tuple[str, list[dict[str, object]]],
                                             tmp_path: Path) -> None:
    topic, generated = loaded
    want = expected_rows(generated)
    uri, cp = tmp_path / "delta", tmp_path / "cp"
    opts = {"maxOffsetsPerTrigger": PER_TRIGGER}

    writer = DeltaBatchWriter(str(uri), partition_by=("date",))
    query = start_delta(spark, spark_broker.bootstrap, topic, uri, cp, trigger=AVAILABLE_NOW,
                        source_options=opts, writer=writer)
    first = finish(query)
    app = f"odradek-lake-etl-{query.id}"
    assert writer.written == writer.calls == sorted(first) and not writer.skipped
    table = DeltaTable(str(uri))
    # One commit per batch: version 0 creates the table with batch 0's rows.
    assert table.version() == len(first) - 1
    assert table.transaction_version(app) == max(first)
    assert table.metadata().partition_columns == ["date"]
    assert delta_rows(uri) == want

    # Re-execute the last batch: its txn version is in the table, so nothing is appended.
    last = forget_last_commit(cp)
    writer = DeltaBatchWriter(str(uri), partition_by=("date",))
    rerun = start_delta(spark, spark_broker.bootstrap, topic, uri, cp, trigger=AVAILABLE_NOW,
                        source_options=opts, writer=writer)
    again = finish(rerun)
    assert rerun.id == query.id  # same checkpoint, same query, same app id
    # It really ran again; the writer skipped it before reading, so no input rows were counted.
    assert set(again) == {last}
    assert writer.calls == writer.skipped == [last] and not writer.written
    table = DeltaTable(str(uri))
    assert table.version() == len(first) - 1
    assert delta_rows(uri) == want

    # The control: the same batch re-executed under an app id the table has not seen is not
    # recognised and its rows land twice. The skip above is what kept the table exact.
    assert forget_last_commit(cp) == last
    writer = DeltaBatchWriter(str(uri), app_id="another-app")
    finish(start_delta(spark, spark_broker.bootstrap, topic, uri, cp, trigger=AVAILABLE_NOW,
                       source_options=opts, writer=writer))
    assert writer.written == [last]
    got = delta_rows(uri)
    assert set(got) == set(want)
    assert sum(got.values()) == COUNT + first[last]
    assert DeltaTable(str(uri)).transaction_version("another-app") == last
