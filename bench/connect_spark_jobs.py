"""Plain Spark jobs doing the work of issue 19's connectors, for their benchmarks.

Each is one Spark batch job in a SparkSession of the bench process (local[2], the odradek
source and sink registered), written as a Spark user would write it without Connect: no
converters or transforms per record in Python, no Connect offsets, no status. What each does
differently from its connector is said where it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

JAR = "/usr/share/java/postgresql.jar"  # Debian's libpostgresql-jdbc-java (DEB_PACKAGES)
PG = {"user": "postgres", "driver": "org.postgresql.Driver"}


def spark_session() -> SparkSession:
    from odradek.spark.session import session

    if not Path(JAR).exists():
        raise SystemExit(f"{JAR} is missing: install Debian's libpostgresql-jdbc-java "
                         "(make setup installs DEB_PACKAGES)")
    spark = session("local[2]", "connect-plain-spark", {
        "spark.jars": JAR, "spark.ui.showConsoleProgress": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def read_topic(spark: SparkSession, bootstrap: str, topic: str,
               headers: bool = False) -> DataFrame:
    """The whole topic, earliest to latest, through odradek's Spark source."""
    reader = (spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    if headers:
        reader = reader.option("includeHeaders", "true")
    return reader.load()


def write_topic(df: DataFrame, bootstrap: str, topic: str) -> None:
    (df.write.format("odradek").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())


def jdbc_url(port: int, db: str) -> str:
    return f"jdbc:postgresql://127.0.0.1:{port}/{db}"


# ------------------------------------------------------------------ mirror

def mirror(spark: SparkSession, source: str, target: str, topic: str, remote: str) -> None:
    """The source cluster's topic into `remote` on the target: same partition, key, value and
    headers. Not the record's timestamp (odradek's sink, like Spark's Kafka sink, has no
    timestamp column: the target stamps its own), no offset syncs, no checkpoints."""
    df = read_topic(spark, source, topic, headers=True)
    write_topic(df.select("key", "value", "headers", "partition"), target, remote)


# ------------------------------------------------------------------ lake sink

def lake_frame(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    """The lake sink's columns, key and value as StringConverter reads them."""
    from pyspark.sql import functions as F

    df = read_topic(spark, bootstrap, topic)
    return df.select("topic", "partition", "offset", "timestamp",
                     F.col("key").cast("string").alias("key"),
                     F.col("value").cast("string").alias("value"))


def lake_parquet(spark: SparkSession, bootstrap: str, topic: str, path: Path) -> None:
    """Spark's own Parquet writer, partitioned by Kafka partition: what the connector's
    format=parquet does per micro-batch."""
    lake_frame(spark, bootstrap, topic).write.mode("append").partitionBy(
        "partition").parquet(str(path))


def lake_delta(spark: SparkSession, bootstrap: str, topic: str, path: Path) -> None:
    """The topic as one Delta commit. Spark has no Delta package here (delta-spark's jars
    come from Maven, which this machine cannot reach), so the table is written as the
    connector writes it: Spark's rows as Arrow on the driver, then delta-rs' write_deltalake,
    partitioned by Kafka partition; without the connector's txn actions (no exactly-once)."""
    from deltalake import write_deltalake

    rows = lake_frame(spark, bootstrap, topic).toArrow()
    write_deltalake(str(path), utc_micros(rows), mode="append", partition_by=["partition"])


def utc_micros(rows: pa.Table) -> pa.Table:
    """Timestamps as Delta takes them: microseconds, UTC."""
    import pyarrow as pa

    return rows.cast(pa.schema([pa.field(f.name, pa.timestamp("us", tz="UTC"))
                                if pa.types.is_timestamp(f.type) else f for f in rows.schema]))


# ------------------------------------------------------------------ JDBC sink

PAYLOAD = "id BIGINT, name STRING, amount DOUBLE, note STRING"


def jdbc_table(conn: Any, table: str) -> None:
    """The table the JDBC sink's auto.create makes for these records (key id, then the
    value's fields), for the plain job, which creates nothing."""
    conn.execute(f'CREATE TABLE "{table}" ("id" BIGINT NOT NULL PRIMARY KEY, '
                 '"name" TEXT NOT NULL, "amount" DOUBLE PRECISION NOT NULL, "note" TEXT NULL)')


def jdbc_upsert(spark: SparkSession, bootstrap: str, topic: str, port: int, db: str,
                table: str) -> None:
    """JsonConverter records (schema + payload) upserted by key into `table`, the common
    Spark way: the payloads parsed by Spark (from_json), written with Spark's JDBC writer
    into a staging table, then one INSERT ... SELECT ... ON CONFLICT DO UPDATE (the last
    record of a key wins, as the connector's upserts in offset order leave it)."""
    import psycopg
    from pyspark.sql import functions as F

    df = read_topic(spark, bootstrap, topic)
    rows = df.select(
        F.col("offset").alias("kafka_offset"),
        F.get_json_object(F.col("key").cast("string"), "$.payload").cast("long").alias("id"),
        F.from_json(F.get_json_object(F.col("value").cast("string"), "$.payload"),
                    PAYLOAD).alias("v")).select("kafka_offset", "id", "v.name", "v.amount",
                                                "v.note")
    stage = f"{table}_stage"
    rows.write.jdbc(jdbc_url(port, db), stage, mode="overwrite",
                    properties={**PG, "truncate": "true"})
    with psycopg.connect(host="127.0.0.1", port=port, dbname=db, user="postgres") as conn:
        conn.execute(
            f'INSERT INTO "{table}" ("id", "name", "amount", "note") '
            f'SELECT DISTINCT ON (id) id, name, amount, note FROM "{stage}" '
            "ORDER BY id, kafka_offset DESC ON CONFLICT (\"id\") DO UPDATE SET "
            '"name" = EXCLUDED."name", "amount" = EXCLUDED."amount", "note" = EXCLUDED."note"')


# ------------------------------------------------------------------ CDC (a snapshot)

def _field(name: str, kind: str, optional: bool = True) -> dict[str, object]:
    return {"type": kind, "optional": optional, "field": name}


ROW_FIELDS = [_field("id", "int64", False), _field("name", "string"),
              _field("amount", "double"), _field("note", "string")]
SOURCE_FIELDS = [_field("version", "string", False), _field("connector", "string", False),
                 _field("name", "string", False), _field("ts_ms", "int64", False),
                 _field("snapshot", "string"), _field("db", "string", False),
                 _field("schema", "string", False), _field("table", "string", False)]


def cdc_snapshot(spark: SparkSession, bootstrap: str, port: int, db: str, table: str,
                 prefix: str) -> None:
    """A SNAPSHOT, not a change stream: the table read once with Spark's JDBC reader and
    written to `<prefix>.public.<table>` as Debezium-shaped read events (op "r", before null,
    after the row, a source block) in JsonConverter's schema + payload envelope. The closest
    plain Spark job: Spark has no logical-replication source, so no inserts, updates or
    deletes after the read, no LSNs, no slot. numeric goes out as a JSON number (Debezium's
    decimal.handling.mode=double shape; the connector's default is precise, base64 bytes)."""
    from pyspark.sql import functions as F

    name = f"{prefix}.public.{table}.Value"
    row = {"type": "struct", "optional": True, "name": name, "fields": ROW_FIELDS}
    value_schema = {"type": "struct", "optional": False, "name": f"{prefix}.public.{table}."
                    "Envelope", "fields": [
                        {**row, "field": "before"}, {**row, "field": "after"},
                        {"type": "struct", "optional": False, "field": "source",
                         "name": "io.debezium.connector.postgresql.Source",
                         "fields": SOURCE_FIELDS},
                        _field("op", "string", False), _field("ts_ms", "int64")]}
    key_schema = {"type": "struct", "optional": False, "name": f"{prefix}.public.{table}.Key",
                  "fields": [_field("id", "int64", False)]}
    df = spark.read.jdbc(jdbc_url(port, db), table, properties=PG)
    now = F.unix_millis(F.current_timestamp())
    after = F.struct(F.col("id").cast("long").alias("id"), "name",
                     F.col("amount").cast("double").alias("amount"), "note")
    source = F.struct(F.lit("2.7.0.Final").alias("version"),
                      F.lit("postgresql").alias("connector"), F.lit(prefix).alias("name"),
                      now.alias("ts_ms"), F.lit("true").alias("snapshot"),
                      F.lit(db).alias("db"), F.lit("public").alias("schema"),
                      F.lit(table).alias("table"))
    payload = F.struct(F.lit(None).cast("struct<id:bigint,name:string,amount:double,"
                                        "note:string>").alias("before"),
                       after.alias("after"), source.alias("source"), F.lit("r").alias("op"),
                       now.alias("ts_ms"))
    keep_nulls = {"ignoreNullFields": "false"}
    value = F.concat(F.lit('{"schema":' + json.dumps(value_schema) + ',"payload":'),
                     F.to_json(payload, keep_nulls), F.lit("}"))
    key = F.concat(F.lit('{"schema":' + json.dumps(key_schema) + ',"payload":'),
                   F.to_json(F.struct(F.col("id").cast("long").alias("id"))), F.lit("}"))
    write_topic(df.select(key.cast("binary").alias("key"), value.cast("binary").alias("value")),
                bootstrap, f"{prefix}.public.{table}")
