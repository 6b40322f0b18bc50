"""Kafka's FileStreamSource and FileStreamSink (the quickstart connectors), as Spark queries.

FileStreamSource: the lines of `file` to `topic`, one record per line (no key), through the
`value.converter`. Its offsets are Kafka's: partition `{"filename": <file>}`, offset
`{"position": <byte after the last line sent>}`, in connect-offsets. Reading standard input
(no `file`) is refused: a worker process has none to give. One task, as in Kafka.

FileStreamSink: the values of `topics` appended to `file`, one line each, in offset order per
partition; the offsets go to the group `connect-<name>`. Both are at-least-once: a crash
between the write and the offset commit sends (or appends) those lines again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from odradek.connect import converters
from odradek.connect.configdef import Field, as_list
from odradek.connect.connectors import sink_query
from odradek.connect.plugins import ConnectorPlugin, RunContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

VERSION = "0.1.0"


def _file_check(raw: str, config: Mapping[str, str]) -> list[str]:
    if not raw.strip():
        return ["reading standard input is not available in a worker: set 'file' to a path"]
    return []


class FileStreamSource(ConnectorPlugin):
    class_name = "org.apache.kafka.connect.file.FileStreamSourceConnector"
    type = "source"
    version = VERSION
    fields = (
        Field("file", "STRING", "", "HIGH", "Source filename.", group="File",
              check=_file_check),
        Field("topic", "LIST", None, "HIGH", "The topic to publish data to", group="File",
              check=lambda raw, c: ([] if len([t for t in raw.split(",") if t.strip()]) == 1
                                    else ["'topic' in FileStreamSourceConnector configuration "
                                          "requires definition of a single topic."])),
        Field("batch.size", "INT", "2000", "LOW",
              "The maximum number of records the source task can read from the file each "
              "time it is polled", group="File", at_least=1),
    )

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [{"file": config.get("file", ""), "topic": config["topic"].strip(),
                 "batch.size": config.get("batch.size", "2000")}]

    def offset_errors(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        if set(partition) != {"filename"} or not isinstance(partition["filename"], str):
            return ["Partitions for FileStreamSourceConnector must contain exactly one key: "
                    "'filename' (a string)"]
        if offset is None:
            return []
        position = offset.get("position")
        if (set(offset) != {"position"} or not isinstance(position, int)
                or isinstance(position, bool) or position < 0):
            return ["The value for the 'position' key in the offset must be a non-negative "
                    "integer"]
        return []

    def start(self, ctx: RunContext) -> StreamingQuery:
        from pyspark.sql import functions as F

        from odradek.connect.connectors.file_lines import FileLinesSource

        ctx.spark.dataSource.register(FileLinesSource)
        path = ctx.config["file"]
        stored = {part.get("filename"): off for part, off in ctx.offsets or []}
        position = int(stored.get(path, {}).get("position", 0))
        value = converters.resolve("value.converter", ctx.config, ctx.worker_config)
        lines = (ctx.spark.readStream.format("odradek_connect_file").option("file", path)
                 .option("position", str(position))
                 .option("batch.size", ctx.config.get("batch.size", "2000")).load())
        writer = lines.select(_encoded(F.col("line"), value).alias("value"))
        topic: dict[str, str] = {"topic": ctx.config["topic"].strip()}
        if value.kind not in FAST or as_list(ctx.config.get("transforms")):
            # Transforms, or a converter Spark expressions do not speak: Python per record.
            writer, topic = _through_python(ctx, lines), {}
        return (writer.writeStream.format("odradek").options(**ctx.cluster.spark_options())
                .options(**topic)
                .option("checkpointLocation", ctx.checkpoint)
                .queryName(sink_query.query_name(ctx.name))
                .trigger(processingTime=sink_query.TRIGGER).start())

    def source_offset(self, config: Mapping[str, str],
                      end: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [({"filename": config["file"]}, {"position": int(end["position"])})]


FAST = ("string", "bytes", "json")  # converters `_encoded` writes as Spark expressions
OUT_SCHEMA = "topic string, key binary, value binary, headers array<struct<key:string,value:binary>>"


def _through_python(ctx: RunContext, lines: DataFrame) -> DataFrame:
    """Each line a ConnectRecord (no key, a STRING value, as Kafka's task makes them), run
    through the transforms and converters in Spark's Python workers."""
    name, config, worker = ctx.name, dict(ctx.config), dict(ctx.worker_config)
    topic = config["topic"].strip()

    def encode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from odradek.connect.data import ConnectRecord, Schema
        from odradek.connect.source_records import SourceRecords

        out_schema = pa.schema([("topic", pa.string()), ("key", pa.binary()),
                                ("value", pa.binary()),
                                ("headers", pa.list_(pa.struct([("key", pa.string()),
                                                                ("value", pa.binary())])))])
        records = SourceRecords(name, config, worker)
        string = Schema("STRING")
        for batch in batches:
            rows = records.encode(ConnectRecord(topic, None, None, None, string, line)
                                  for line in batch.column("line").to_pylist())
            yield pa.RecordBatch.from_pylist(rows, schema=out_schema)

    return lines.select("line").mapInArrow(encode, OUT_SCHEMA)


def _encoded(line: Any, converter: Any) -> Any:
    """The converter's bytes for a string column, as Spark expressions (no Python per row)."""
    from pyspark.sql import functions as F

    if converter.kind != "json":
        return line.cast("binary")
    if converter.schemas:
        envelope = F.struct(F.struct(F.lit("string").alias("type"),
                                     F.lit(False).alias("optional")).alias("schema"),
                            line.alias("payload"))
        return F.to_json(envelope).cast("binary")
    quoted = F.to_json(F.array(line))  # '["text"]': the brackets come off
    return F.regexp_extract(quoted, r"^\[(.*)\]$", 1).cast("binary")


class FileStreamSink(ConnectorPlugin):
    class_name = "org.apache.kafka.connect.file.FileStreamSinkConnector"
    type = "sink"
    version = VERSION
    fields = (
        Field("file", "STRING", "", "HIGH", "Destination filename.", group="File",
              check=_file_check),
    )

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        # Kafka's sink hands every task the same config (the group spreads the partitions).
        return [dict(config) for _ in range(max_tasks)]

    def start(self, ctx: RunContext) -> StreamingQuery:
        from odradek.connect.sink_records import SinkRecords

        path = ctx.config["file"]
        records = SinkRecords(ctx.name, ctx.config, ctx.worker_config, ctx.cluster)

        def write(df: DataFrame, batch_id: int) -> None:
            rows = (df.select(*sink_query.COLUMNS).orderBy("topic", "partition", "offset")
                    .toArrow().to_pylist())
            if not rows:
                return
            converted = records.convert(rows)
            with open(path, "a", encoding="utf-8") as out:
                for record in converted:
                    out.write(converters.text_of(record.value) + "\n")
                out.flush()
                os.fsync(out.fileno())

        return sink_query.start_each_batch(ctx, sink_query.stream(ctx), write)
