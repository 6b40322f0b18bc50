"""The lake sink's Delta format: exactly-once through Delta transactions.

Each micro-batch is one Delta commit (delta-rs' write_deltalake) that carries, beside the
rows, one `txn` action per Kafka partition it wrote: appId `["<connector>", topic,
partition]`, version the next offset to read. That is how Spark's Delta streaming sink makes
its writes idempotent (appId and version in the same atomic commit as the data), with
Kafka's offsets as the versions. The table, not the group, is then the truth:

- at start the sink reads each partition's txn version and resumes there (the group
  `connect-<name>`, committed after each batch for lag tools, may lag behind the table by the
  last batch when a worker dies between the two);
- before each commit it reads the versions again and drops rows already in the table (a
  batch replayed after a crash, or a second owner during a rebalance), so no row is written
  twice; a concurrent commit that wins the race fails ours, which is retried the same way.

The commit also records the offsets as custom metadata (`odradek.connect.offsets`) for
people reading the table's history. Files written by a commit that never happened (a kill
between the Parquet files and the log entry) are not part of the table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect.connectors import sink_query
from odradek.connect.plugins import RunContext

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

Convert = Callable[["pa.Table"], "pa.Table"]
COMMIT_RETRIES = 5
METADATA_KEY = "odradek.connect.offsets"


def app_id(connector: str, topic: str, partition: int) -> str:
    # JSON: unambiguous whatever characters the connector's name holds
    return json.dumps([connector, topic, partition])


def table_offsets(path: str, connector: str,
                  partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The next offset per partition, as the table's txn actions say (absent: none written)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(path)
    except TableNotFoundError:
        return {}
    out = {}
    for topic, partition in partitions:
        version = table.transaction_version(app_id(connector, topic, partition))
        if version is not None:
            out[(topic, partition)] = int(version)
    return out


def unwritten(rows: pa.Table, done: Mapping[tuple[str, int], int]) -> pa.Table:
    """The rows of `rows` at or after their partition's next offset in `done`."""
    import pyarrow.compute as pc

    if not done or rows.num_rows == 0:
        return rows
    old = None
    for (topic, partition), next_offset in done.items():
        hit = pc.and_(pc.and_(pc.equal(rows["topic"], topic),
                              pc.equal(rows["partition"], partition)),
                      pc.less(rows["offset"], next_offset))
        old = hit if old is None else pc.or_(old, hit)
    assert old is not None
    return rows.filter(pc.invert(old))


def next_offsets(rows: pa.Table) -> dict[tuple[str, int], int]:
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return {}
    grouped = rows.group_by(["topic", "partition"]).aggregate([("offset", "max")])
    return {(t, int(p)): int(o) + 1 for t, p, o in zip(
        grouped["topic"].to_pylist(), grouped["partition"].to_pylist(),
        pc.cast(grouped["offset_max"], "int64").to_pylist(), strict=True)}


class DeltaWriter:
    def __init__(self, path: str, connector: str, partition_by: list[str]) -> None:
        self.path = path
        self.connector = connector
        self.partition_by = partition_by

    def write(self, rows: pa.Table, convert: Convert | None = None) -> int:
        """Commit the rows not yet in the table, with their offsets; the rows written.

        `convert` (the transforms) turns the fresh rows into the rows to write; the offsets
        are those of the rows consumed, so a record a transform drops still counts."""
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        partitions = sorted({(t, int(p)) for t, p in zip(
            rows["topic"].to_pylist(), rows["partition"].to_pylist(), strict=True)})
        for attempt in range(COMMIT_RETRIES):
            fresh = unwritten(rows, table_offsets(self.path, self.connector, partitions))
            ends = next_offsets(fresh)
            if not ends:
                return 0
            txns = [Transaction(app_id(self.connector, t, p), o) for (t, p), o in ends.items()]
            metadata = {METADATA_KEY: json.dumps(
                {t: {str(p): o for (t2, p), o in sorted(ends.items()) if t2 == t}
                 for t in sorted({t for t, _ in ends})})}
            out = convert(fresh) if convert is not None else fresh
            if out.num_rows == 0:
                return 0  # all dropped: a restart reads them again and drops them again
            try:
                write_deltalake(self.path, out, mode="append",
                                partition_by=self.partition_by or None,
                                commit_properties=CommitProperties(custom_metadata=metadata,
                                                                   app_transactions=txns))
                return int(out.num_rows)
            except CommitFailedError:
                if attempt == COMMIT_RETRIES - 1:
                    raise
        return 0


def resume(ctx: RunContext) -> None:
    """Where the stream starts: the table's txn versions, over the group's offsets."""
    path = ctx.config["path"]
    topics = sink_query.topics_of(ctx)
    stored = table_offsets(path, ctx.name, [(t, p) for t, n in topics.items() for p in range(n)])
    committed: dict[str, dict[int, int]] = {t: dict(v) for t, v in (ctx.offsets or {}).items()}
    for (topic, partition), offset in stored.items():
        committed.setdefault(topic, {})[partition] = offset
    ctx.offsets = committed


def start(ctx: RunContext, table: DataFrame, parts: list[str],
          convert: Convert | None = None) -> StreamingQuery:
    """The Delta query: `table` (the lake's columns, streamed from where `resume` said;
    with `convert`, the raw record columns it turns into them) appended in one Delta commit
    per micro-batch."""
    writer = DeltaWriter(ctx.config["path"], ctx.name, parts)

    def write(batch: DataFrame, batch_id: int) -> None:
        rows = batch.toArrow()
        if rows.num_rows:
            writer.write(rows if convert is not None else _plain(rows), convert)

    return sink_query.start_each_batch(ctx, table, write)


def _plain(rows: pa.Table) -> pa.Table:
    """Spark's Arrow as Delta takes it: timestamps in microseconds, UTC."""
    import pyarrow as pa

    fields = []
    for field in rows.schema:
        if pa.types.is_timestamp(field.type):
            fields.append(pa.field(field.name, pa.timestamp("us", tz="UTC")))
        else:
            fields.append(field)
    return rows.cast(pa.schema(fields))



def transformer(ctx: RunContext, key: Any, value: Any) -> Convert:
    """Raw record columns -> the lake's columns through the converters and the transforms
    (a record's topic is the transformed one; key and value as text, or bytes for
    ByteArrayConverter, as the Spark path writes them)."""
    from odradek.connect.sink_records import SinkRecords

    records = SinkRecords(ctx.name, ctx.config, ctx.worker_config, ctx.cluster)
    return lambda raw: lake_rows(records.convert(raw.to_pylist()), key.kind, value.kind)


def lake_rows(records: list[Any], key_kind: str, value_kind: str) -> pa.Table:
    import pyarrow as pa

    from odradek.connect.converters import text_of

    def column(values: list[Any], kind: str) -> pa.Array:
        if kind == "bytes":
            return pa.array([v if v is None or isinstance(v, bytes) else text_of(v).encode()
                             for v in values], pa.binary())
        return pa.array([None if v is None else text_of(v) for v in values], pa.string())

    return pa.table({
        "topic": pa.array([r.topic for r in records], pa.string()),
        "partition": pa.array([r.partition for r in records], pa.int32()),
        "offset": pa.array([r.offset for r in records], pa.int64()),
        "timestamp": pa.array([r.timestamp for r in records], pa.int64())
        .cast(pa.timestamp("ms")).cast(pa.timestamp("us", tz="UTC")),
        "key": column([r.key for r in records], key_kind),
        "value": column([r.value for r in records], value_kind)})
