"""Apply a micro-batch of change events to PostgreSQL, each batch exactly once.

Within a batch only the last change per primary key counts (offset order; a key lives on one
partition, as Kafka's partitioner keeps it): an upsert of its `after` row or a delete. The
rows, and the batch id in `odradek_cdc_progress`, are written in ONE PostgreSQL transaction:
the progress row is locked first, a batch at or below the recorded id is skipped, so a batch
Spark re-executes after a crash (data committed here, Spark's commit log not yet written)
changes nothing. Upserts of full rows would mostly survive a replay anyway; the marker is what
makes it exact (a replay cannot undo a later manual fix, counters stay true) and it is cheap.

The progress row is keyed by an app id, by default the streaming query's id (stable across
restarts of one checkpoint; a new checkpoint is a new query starting again at batch 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from examples.batch_identity import query_id
from examples.cdc_postgres.changes import CUSTOMERS, DELETE_OP, TableSpec

PROGRESS_TABLE = "odradek_cdc_progress"


def ensure_tables(conninfo: str, spec: TableSpec = CUSTOMERS) -> None:
    """The target table (primary key `spec.key`) and the progress table, if missing."""
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}{}").format(sql.Identifier(c.name), sql.SQL(c.pg_type),
                                  sql.SQL(" PRIMARY KEY") if c.name == spec.key else sql.SQL(""))
        for c in spec.columns)
    with psycopg.connect(conninfo) as conn:
        conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(sql.Identifier(spec.name), columns))
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (app_id text PRIMARY KEY, last_batch_id bigint NOT NULL,"
            " batches_applied bigint NOT NULL, changes_applied bigint NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())").format(sql.Identifier(PROGRESS_TABLE)))


def last_change_per_key(df: DataFrame) -> DataFrame:
    """One row per key: the change with the highest offset (partition breaks a cross-partition tie)."""
    newest = Window.partitionBy("pk").orderBy(F.col("kafka_offset").desc(), F.col("kafka_partition").desc())
    return df.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1").drop("_rank")


@dataclass
class PostgresBatchWriter:
    """A `foreachBatch` function over the frame `pipeline.changes()` returns.

    `calls`, `applied` and `skipped` record batch ids (foreachBatch runs in the driver's
    Python process in classic PySpark, so the caller sees them).
    """

    conninfo: str
    spec: TableSpec = CUSTOMERS
    app_id: str | None = None
    calls: list[int] = field(default_factory=list)
    applied: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.calls.append(batch_id)
        app = self.app_id or f"odradek-cdc-{query_id(df)}"
        final = last_change_per_key(df).select("op", *self.spec.names)
        rows = [tuple(r.values()) for r in final.toArrow().to_pylist()]
        if self.apply(app, batch_id, rows):
            self.applied.append(batch_id)
        else:
            self.skipped.append(batch_id)

    def apply(self, app: str, batch_id: int, rows: Sequence[tuple[Any, ...]]) -> bool:
        """Rows are (op, *columns), at most one per key. False if the batch was applied before."""
        spec = self.spec
        target, key = sql.Identifier(spec.name), sql.Identifier(spec.key)
        progress = sql.Identifier(PROGRESS_TABLE)
        names = sql.SQL(", ").join(sql.Identifier(n) for n in spec.names)
        with psycopg.connect(self.conninfo) as conn, conn.transaction(), conn.cursor() as cur:
            cur.execute(sql.SQL("INSERT INTO {} (app_id, last_batch_id, batches_applied, changes_applied)"
                                " VALUES (%s, -1, 0, 0) ON CONFLICT (app_id) DO NOTHING").format(progress),
                        (app,))
            # The row lock orders any two writers with one app id: the second sees the first's batch.
            cur.execute(sql.SQL("SELECT last_batch_id FROM {} WHERE app_id = %s FOR UPDATE").format(progress),
                        (app,))
            found = cur.fetchone()
            assert found is not None
            if batch_id <= found[0]:
                return False
            if rows:
                cur.execute(sql.SQL("CREATE TEMP TABLE odradek_stage ON COMMIT DROP AS "
                                    "SELECT ''::text AS op, {} FROM {} WITH NO DATA").format(names, target))
                with cur.copy(sql.SQL("COPY odradek_stage (op, {}) FROM STDIN").format(names)) as copy:
                    for row in rows:
                        copy.write_row(row)
                cur.execute(sql.SQL("DELETE FROM {} t USING odradek_stage s WHERE s.op = %s AND t.{} = s.{}")
                            .format(target, key, key), (DELETE_OP,))
                updates = sql.SQL(", ").join(
                    sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(n), sql.Identifier(n))
                    for n in spec.names if n != spec.key)
                cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM odradek_stage WHERE op <> %s "
                                    "ON CONFLICT ({}) DO UPDATE SET {}")
                            .format(target, names, names, key, updates), (DELETE_OP,))
            cur.execute(sql.SQL("UPDATE {} SET last_batch_id = %s, batches_applied = batches_applied + 1,"
                                " changes_applied = changes_applied + %s, applied_at = now()"
                                " WHERE app_id = %s").format(progress), (batch_id, len(rows), app))
        return True
