"""The lake sink's Delta writer against a real Delta table (delta-rs): each commit carries
its partitions' next offsets as Delta txn actions, and rows already committed are never
written again, whether a batch is replayed whole or overlaps the table's end."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from odradek.connect.connectors.lake_delta import (
    METADATA_KEY,
    DeltaWriter,
    app_id,
    next_offsets,
    table_offsets,
    unwritten,
)


def rows(topic: str, partition: int, offsets: range) -> pa.Table:
    return pa.table({"topic": [topic] * len(offsets),
                     "partition": pa.array([partition] * len(offsets), pa.int32()),
                     "offset": pa.array(list(offsets), pa.int64()),
                     "value": [f"{topic}-{partition}-{o}" for o in offsets]})


def test_replayed_and_overlapping_batches_land_once(tmp_path: Path) -> None:
    path = str(tmp_path / "table")
    writer = DeltaWriter(path, "lake", ["partition"])
    first = pa.concat_tables([rows("a", 0, range(0, 5)), rows("a", 1, range(0, 3))])
    assert writer.write(first) == 8
    assert writer.write(first) == 0  # the same batch again: nothing new
    overlap = pa.concat_tables([rows("a", 0, range(3, 8)), rows("b", 0, range(10, 12))])
    assert writer.write(overlap) == 5  # 5, 6, 7 of a-0 and both of b-0
    table = DeltaTable(path)
    got = table.to_pyarrow_table()
    keys = sorted(zip(got["topic"].to_pylist(), got["partition"].to_pylist(),
                      got["offset"].to_pylist(), strict=True))
    assert keys == sorted({(t, p, o) for t, p, o in keys})  # no duplicates
    assert len(keys) == 13
    assert table.metadata().partition_columns == ["partition"]
    assert table_offsets(path, "lake", [("a", 0), ("a", 1), ("b", 0), ("b", 1)]) == {
        ("a", 0): 8, ("a", 1): 3, ("b", 0): 12}
    assert table.transaction_version(app_id("lake", "a", 0)) == 8
    assert table.transaction_version(app_id("other", "a", 0)) is None
    newest = table.history(1)[0]
    assert json.loads(newest[METADATA_KEY]) == {"a": {"0": 8}, "b": {"0": 12}}


def test_offsets_helpers() -> None:
    batch = pa.concat_tables([rows("a", 0, range(0, 4)), rows("a", 1, range(7, 9))])
    assert next_offsets(batch) == {("a", 0): 4, ("a", 1): 9}
    assert unwritten(batch, {}).num_rows == 6
    left = unwritten(batch, {("a", 0): 2, ("a", 1): 100, ("z", 0): 1})
    assert left["offset"].to_pylist() == [2, 3]
    assert next_offsets(left.slice(0, 0)) == {}
    assert table_offsets("/nonexistent/table", "lake", [("a", 0)]) == {}


def test_transforms_write_renamed_rows_and_keep_the_consumed_offsets(tmp_path: Path) -> None:
    from odradek.connect import converters
    from odradek.connect.connectors.lake_delta import lake_rows
    from odradek.connect.sink_records import SinkRecords

    t = "org.apache.kafka.connect.transforms."
    config = {"key.converter": converters.STRING, "value.converter": converters.STRING,
              "transforms": "drop,route",
              "transforms.drop.type": t + "Filter", "transforms.drop.predicate": "tomb",
              "transforms.route.type": t + "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "lake-$1",
              "predicates": "tomb", "predicates.tomb.type": t + "predicates.RecordIsTombstone"}
    records = SinkRecords("lake", config, {})
    raw = pa.table({"topic": ["a", "a", "a"],
                    "partition": pa.array([0, 0, 0], pa.int32()),
                    "offset": pa.array([0, 1, 2], pa.int64()),
                    "timestamp": pa.array([1000, 2000, 3000], pa.int64())
                    .cast(pa.timestamp("ms")).cast(pa.timestamp("us", tz="UTC")),
                    "key": [b"k0", b"k1", b"k2"], "value": [b"v0", None, b"v2"],
                    "headers": pa.array([[], [], []], pa.list_(pa.struct(
                        [("key", pa.string()), ("value", pa.binary())])))})

    def convert(rows: pa.Table) -> pa.Table:
        return lake_rows(records.convert(rows.to_pylist()), "string", "string")

    path = str(tmp_path / "table")
    writer = DeltaWriter(path, "lake", [])
    assert writer.write(raw, convert) == 2  # the tombstone filtered out
    assert writer.write(raw, convert) == 0
    got = DeltaTable(path).to_pyarrow_table().sort_by("offset")
    assert got["topic"].to_pylist() == ["lake-a", "lake-a"]
    assert got["value"].to_pylist() == ["v0", "v2"]
    assert got["timestamp"].cast(pa.int64()).to_pylist() == [1_000_000, 3_000_000]
    # the offsets are the consumed topic's, not the renamed one's
    assert table_offsets(path, "lake", [("a", 0), ("lake-a", 0)]) == {("a", 0): 3}
