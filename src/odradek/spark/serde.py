"""Parse topic values in a pipeline: JSON with a declared schema, or Avro, JSON and Protobuf in
the Confluent wire format against a Schema Registry; and encode Avro for the sink.

    rows = spark.readStream.format("odradek")...load()
    views = parse_json(rows, "user STRING, region STRING, ts TIMESTAMP",
                       on_error="dead-letter", dead_letter=DeadLetter("clicks-dlt", bootstrap))
    views.select("data.*", "timestamp")

Both parsers keep every input column and add the parsed record as a struct column (`alias`,
default "data"); a null value (a tombstone) parses to a null struct, not an error. What a value
that does not parse does is `on_error`:

- "fail" (default): the query fails; the message names topic, partition and offset.
- "dead-letter": the record goes, unchanged and with `__odradek.errors.*` headers, to the
  `dead_letter` topic (see deadletter.py for the at-least-once contract); the others go on.
- "column": every row goes on, with an `error` column (null when the value parsed) for
  callers that route errors themselves, e.g. in foreachBatch.

JSON is parsed by Spark's own from_json (in the JVM, no Python). Confluent-framed values
(magic byte, schema id) are decoded in one mapInArrow pass over Arrow batches, which also
dead-letters, so the rows cross to Python once: Avro by fastavro (avro.AvroCodec), JSON and
Protobuf by confluent_wire's codecs. Each finds the writer schema by id in the registry
(`schema.registry.url`, registry_client.RegistryClient):

    registry = RegistryClient.from_config({"schema.registry.url": url})
    payments = parse_avro(rows, AvroCodec(registry, PAYMENT, subject="payments-value"))
    orders = parse_protobuf(rows, ProtobufCodec(registry, subject="orders-value"))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from odradek.spark.avro import AvroCodec, DecodeError, frame
from odradek.spark.avrotypes import spark_type, value_fixer
from odradek.spark.confluent_wire import JsonCodec, ProtobufCodec
from odradek.spark.deadletter import (
    ON_ERROR,
    Bad,
    DeadLetter,
    Publisher,
    UnparsableRecord,
    describe,
)

ERROR = "_odradek_error"
CORRUPT = "_odradek_corrupt"
JSON_ERROR = "malformed JSON, or a value that does not match the declared schema"
EMPTY_ERROR = "empty value, or JSON that is not an object"

__all__ = ["DeadLetter", "parse_avro", "parse_confluent_json", "parse_json", "parse_protobuf",
           "to_avro_value", "to_confluent_json_value", "to_protobuf_value"]


def _check(df: DataFrame, column: str, alias: str, on_error: str, dead_letter: DeadLetter | None,
           error_column: str) -> None:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    if on_error == "dead-letter" and dead_letter is None:
        raise ValueError("on_error='dead-letter' needs dead_letter=DeadLetter(topic, bootstrap)")
    if column not in df.columns:
        raise ValueError(f"column {column!r} not found in {df.columns}")
    for name in (alias, *([error_column] if on_error == "column" else [])):
        if name in df.columns:
            raise ValueError(f"column {name!r} already exists; pass another alias/error_column")


def parse_json(df: DataFrame, schema: StructType | str, *, column: str = "value", alias: str = "data",
               on_error: str = "fail", dead_letter: DeadLetter | None = None,
               error_column: str = "error", options: dict[str, str] | None = None) -> DataFrame:
    """`column` (binary or string) parsed as JSON with `schema` (StructType or DDL string)."""
    _check(df, column, alias, on_error, dead_letter, error_column)
    if isinstance(schema, StructType):
        with_corrupt: StructType | str = StructType([*schema.fields, StructField(CORRUPT, StringType())])
    else:
        with_corrupt = f"{schema}, {CORRUPT} STRING"
    opts = {**(options or {}), "mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}
    raw = F.col(column).cast("string")
    parsed = F.from_json(raw, with_corrupt, opts)
    tmp = f"{alias}__parsed"
    out = df.withColumn(tmp, parsed)
    p = F.col(tmp)
    err = (F.when(F.col(column).isNull(), F.lit(None).cast("string"))
           .when(p.isNull(), F.lit(EMPTY_ERROR))
           .when(p[CORRUPT].isNotNull(), F.lit(JSON_ERROR)))
    out = (out.withColumn(ERROR, err)
           .withColumn(alias, F.when(F.col(ERROR).isNull(), p.dropFields(CORRUPT)))
           .drop(tmp))
    return _route(out, on_error, dead_letter, column, error_column, "json")


def _fail_filter(df: DataFrame) -> DataFrame:
    def col_or_null(name: str) -> Column:
        return F.col(name).cast("string") if name in df.columns else F.lit("?")

    message = F.concat(F.lit("unparsable record at topic "), col_or_null("topic"),
                       F.lit(" partition "), col_or_null("partition"),
                       F.lit(" offset "), col_or_null("offset"), F.lit(": "), F.col(ERROR))
    # A filter, not a projected column, so that pruning an unused column cannot drop the check.
    return df.filter(F.when(F.col(ERROR).isNotNull(), F.raise_error(message)).otherwise(F.lit(True))) \
        .drop(ERROR)


def _route(df: DataFrame, on_error: str, dead_letter: DeadLetter | None, column: str,
           error_column: str, fmt: str) -> DataFrame:
    if on_error == "column":
        return df.withColumnRenamed(ERROR, error_column)
    if on_error == "fail":
        return _fail_filter(df)
    assert dead_letter is not None
    out_schema = StructType([f for f in df.schema.fields if f.name != ERROR])
    target = dead_letter

    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        publisher = Publisher(target, fmt)
        for batch in batches:
            errors = batch.column(batch.schema.get_field_index(ERROR))
            yield _dead_letter_batch(batch, errors, column, publisher)
        publisher.flush()

    return df.mapInArrow(route, out_schema)


def _pylist(batch: pa.RecordBatch, name: str, rows: list[int]) -> list[Any]:
    idx = batch.schema.get_field_index(name)
    if idx < 0:
        return [None] * len(rows)
    return batch.column(idx).take(pa.array(rows, pa.int64())).to_pylist()


def _dead_letter_batch(batch: pa.RecordBatch, errors: pa.Array, column: str,
                       publisher: Publisher) -> pa.RecordBatch:
    """Send the rows whose error is set to the dead-letter topic; return the others."""
    keep = pc.is_null(errors)
    drop = batch.schema.get_field_index(ERROR)
    good = batch.filter(keep) if errors.null_count != len(errors) else batch
    if drop >= 0:
        good = good.drop_columns([ERROR])
    if errors.null_count != len(errors):
        rows = pc.indices_nonzero(pc.invert(keep)).to_pylist()
        reasons = errors.take(pa.array(rows, pa.int64())).to_pylist()
        values = _pylist(batch, column, rows)
        if values and isinstance(values[0], str):
            values = [v.encode() if v is not None else None for v in values]
        keys = _pylist(batch, "key", rows)
        topics = _pylist(batch, "topic", rows)
        parts = _pylist(batch, "partition", rows)
        offsets = _pylist(batch, "offset", rows)
        headers = _pylist(batch, "headers", rows)
        for i in range(len(rows)):
            key = keys[i].encode() if isinstance(keys[i], str) else keys[i]
            hdrs = [(h["key"], h["value"]) for h in headers[i] or ()]
            publisher.send(Bad(key, values[i], topics[i], parts[i], offsets[i], hdrs, reasons[i]))
        # The good rows leave this task only once their batch's bad ones are stored.
        publisher.flush()
    return good


def parse_avro(df: DataFrame, codec: AvroCodec, *, column: str = "value", alias: str = "data",
               on_error: str = "fail", dead_letter: DeadLetter | None = None,
               error_column: str = "error") -> DataFrame:
    """`column` (binary) decoded as Confluent-framed Avro into codec.schema's Spark type."""
    return _parse_framed(df, codec, spark_type(codec.schema), value_fixer(codec.schema), "avro",
                         column=column, alias=alias, on_error=on_error, dead_letter=dead_letter,
                         error_column=error_column)


def parse_confluent_json(df: DataFrame, codec: JsonCodec, *, column: str = "value",
                         alias: str = "data", on_error: str = "fail",
                         dead_letter: DeadLetter | None = None,
                         error_column: str = "error") -> DataFrame:
    """`column` (binary) decoded as Confluent-framed JSON: the writer's JSON Schema comes from
    the registry by id and the document is validated against it (confluent_wire.JsonCodec)."""
    return _parse_framed(df, codec, codec.spark_type, None, "json", column=column, alias=alias,
                         on_error=on_error, dead_letter=dead_letter, error_column=error_column)


def parse_protobuf(df: DataFrame, codec: ProtobufCodec, *, column: str = "value",
                   alias: str = "data", on_error: str = "fail",
                   dead_letter: DeadLetter | None = None, error_column: str = "error") -> DataFrame:
    """`column` (binary) decoded as Confluent-framed Protobuf: the writer's descriptor comes
    from the registry by id, the message from the message indexes (confluent_wire)."""
    return _parse_framed(df, codec, codec.spark_type, None, "protobuf", column=column,
                         alias=alias, on_error=on_error, dead_letter=dead_letter,
                         error_column=error_column)


def _parse_framed(df: DataFrame, codec: Any, record_type: StructType, fixer: Any, fmt: str, *,
                  column: str, alias: str, on_error: str, dead_letter: DeadLetter | None,
                  error_column: str) -> DataFrame:
    """One mapInArrow pass: each value through codec.decode (DecodeError only), then `fixer`."""
    _check(df, column, alias, on_error, dead_letter, error_column)
    out_fields = [*df.schema.fields, StructField(alias, record_type)]
    if on_error == "column":
        out_fields.append(StructField(error_column, StringType()))
    out_schema = StructType(out_fields)
    arrow_record = to_arrow_type(record_type, timezone="UTC")
    mode, target = on_error, dead_letter

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fix = fixer
        publisher = Publisher(target, fmt) if target is not None else None
        for batch in batches:
            values = batch.column(batch.schema.get_field_index(column)).to_pylist()
            records: list[Any] = []
            errors: list[str | None] = []
            for i, v in enumerate(values):
                if v is None:
                    records.append(None)
                    errors.append(None)
                    continue
                try:
                    rec = codec.decode(v)
                    records.append(fix(rec) if fix is not None else rec)
                    errors.append(None)
                except DecodeError as exc:
                    if mode == "fail":
                        raise UnparsableRecord(describe(*_where(batch, i), str(exc))) from None
                    records.append(None)
                    errors.append(str(exc))
            try:
                data = pa.array(records, type=arrow_record)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                # A record that decoded but does not fit its Spark type: find which, one by one.
                data, errors = _convert_each(records, errors, arrow_record, exc)
                if mode == "fail":
                    first = next(i for i, e in enumerate(errors) if e is not None)
                    raise UnparsableRecord(describe(*_where(batch, first), errors[first] or "")) from None
            out = batch.append_column(alias, data)
            err_array = pa.array(errors, pa.string())
            if mode == "column":
                yield out.append_column(error_column, err_array)
            elif mode == "dead-letter":
                assert publisher is not None
                yield _dead_letter_batch(out.append_column(ERROR, err_array), err_array,
                                         column, publisher)
            else:
                yield out
        if publisher is not None:
            publisher.flush()

    return df.mapInArrow(decode, out_schema)


def _where(batch: pa.RecordBatch, row: int) -> tuple[Any, Any, Any]:
    def at(name: str) -> Any:
        idx = batch.schema.get_field_index(name)
        return None if idx < 0 else batch.column(idx)[row].as_py()
    return at("topic"), at("partition"), at("offset")


def _convert_each(records: list[Any], errors: list[str | None], arrow_type: pa.DataType,
                  first: Exception) -> tuple[pa.Array, list[str | None]]:
    for i, rec in enumerate(records):
        if rec is None:
            continue
        try:
            pa.array([rec], type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            records[i] = None
            errors[i] = f"record does not fit the Spark type: {exc}"
    return pa.array(records, type=arrow_type), errors


def to_avro_value(df: DataFrame, codec: AvroCodec, *, column: str = "data",
                  alias: str = "value") -> DataFrame:
    """Replace the struct `column` by `alias`: its Confluent-framed Avro encoding (binary), for
    the odradek sink. The schema id comes from codec.registry (registered on the driver now,
    so every task frames with the same id)."""
    if column not in df.columns:
        raise ValueError(f"column {column!r} not found in {df.columns}")
    codec.schema_id()
    fields = [f for f in df.schema.fields if f.name != column]
    out_schema = StructType([*fields, StructField(alias, BinaryType())])

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            idx = batch.schema.get_field_index(column)
            values = [None if r is None else codec.encode(r) for r in batch.column(idx).to_pylist()]
            out = batch.drop_columns([column]).append_column(alias, pa.array(values, pa.binary()))
            yield out

    return df.mapInArrow(encode, out_schema)


def to_confluent_json_value(df: DataFrame, codec: JsonCodec, *, column: str = "data",
                            alias: str = "value") -> DataFrame:
    """Replace the struct `column` by `alias`: Spark's to_json of it behind the Confluent header
    (binary), built in the JVM. The id is codec.schema_id() (auto.register.schemas or
    use.latest.version, asked on the driver now); the documents are not validated here."""
    if column not in df.columns:
        raise ValueError(f"column {column!r} not found in {df.columns}")
    header = frame(codec.schema_id(), b"")
    value = F.when(F.col(column).isNull(), F.lit(None).cast("binary")).otherwise(
        F.concat(F.lit(header), F.encode(F.to_json(F.col(column)), "UTF-8")))
    return df.withColumn(alias, value).drop(column) if alias != column else \
        df.withColumn(alias, value)


def to_protobuf_value(df: DataFrame, codec: ProtobufCodec, *, column: str = "data",
                      alias: str = "value") -> DataFrame:
    """Replace the struct `column` by `alias`: the Confluent-framed Protobuf message of the
    subject's latest schema (use.latest.version), for the odradek sink."""
    if column not in df.columns:
        raise ValueError(f"column {column!r} not found in {df.columns}")
    fields = [f for f in df.schema.fields if f.name != column]
    out_schema = StructType([*fields, StructField(alias, BinaryType())])

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            idx = batch.schema.get_field_index(column)
            values = [None if r is None else codec.encode(r) for r in batch.column(idx).to_pylist()]
            yield batch.drop_columns([column]).append_column(alias, pa.array(values, pa.binary()))

    return df.mapInArrow(encode, out_schema)
