"""The JDBC source's logic for PostgreSQL, sans I/O: its settings, Confluent's offsets, the
SQL each mode runs, and PostgreSQL's columns as Connect schemas and values.

Modes, as Confluent's TimestampIncrementingCriteria words them:
- `incrementing`: `WHERE id > ? ORDER BY id`; offset `{"incrementing": <last id>}` (start -1).
- `timestamp`: `WHERE ts > ? AND ts < ? ORDER BY ts` (the upper bound: the database's
  current time minus `timestamp.delay.interval.ms`); offset `{"timestamp": <epoch ms>,
  "timestamp_nanos": <nanoseconds within the second>}` (java.sql.Timestamp's getTime and
  getNanos). Several `timestamp.column.name`s are COALESCEd, as there.
- `timestamp+incrementing`: `WHERE ts < ? AND ((ts = ? AND id > ?) OR ts > ?) ORDER BY ts,
  id`; both offsets.
- `bulk`: the whole table each poll; no offset.

A Spark micro-batch is a closed range (start, end]: `end` is chosen first (`latest_sql`, at
most `batch.max.rows` rows on), then the rows in the range are read (`range_sql`), so a batch
that Spark runs again reads the same rows. In timestamp mode a range ends on a timestamp, so
rows sharing one never straddle two batches (Confluent's strict `>` would lose the rest).

Source partitions are Confluent's offset protocol v1: `{"protocol": "1", "table":
"<schema>.<table>"}` (v0's `{"table": "<table>"}` is read too), and `{"query": "query"}` in
query mode. Timestamps without a zone are UTC (Confluent's `db.timezone` default).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.connect import data
from odradek.connect.configdef import as_list
from odradek.connect.data import DataError, Schema

MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")
QUERY_PARTITION = {"query": "query"}


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Table:
    schema: str
    name: str

    @property
    def fqn(self) -> str:
        return f"{self.schema}.{self.name}"

    @property
    def sql(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"


@dataclass(frozen=True)
class SourceSettings:
    mode: str
    incrementing: str = ""
    timestamps: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    query: str = ""
    topic_prefix: str = ""
    batch_max_rows: int = 100
    delay_ms: int = 0
    poll_ms: int = 5000

    @classmethod
    def of(cls, config: Mapping[str, str]) -> SourceSettings:
        return cls(mode=config.get("mode", "").strip(),
                   incrementing=config.get("incrementing.column.name", "").strip(),
                   timestamps=tuple(as_list(config.get("timestamp.column.name"))),
                   tables=tuple(as_list(config.get("table.whitelist"))),
                   query=config.get("query", "").strip(),
                   topic_prefix=config.get("topic.prefix", ""),
                   batch_max_rows=int(config.get("batch.max.rows", "100")),
                   delay_ms=int(config.get("timestamp.delay.interval.ms", "0")),
                   poll_ms=int(config.get("poll.interval.ms", "5000")))

    @property
    def uses_incrementing(self) -> bool:
        return self.mode in ("incrementing", "timestamp+incrementing")

    @property
    def uses_timestamp(self) -> bool:
        return self.mode in ("timestamp", "timestamp+incrementing")

    def errors(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.uses_incrementing and not self.incrementing:
            out["incrementing.column.name"] = [
                f"Mode {self.mode} requires incrementing.column.name to be set"]
        if self.uses_timestamp and not self.timestamps:
            out["timestamp.column.name"] = [
                f"Mode {self.mode} requires timestamp.column.name to be set"]
        if self.query and self.tables:
            out["query"] = ["Do not specify table filtering (table.whitelist) when using the "
                            "query mode."]
        if not self.query and not self.tables:
            # Confluent would read every table of the database; here the tables are named.
            out["table.whitelist"] = ["Set table.whitelist (the tables to read) or query: "
                                      "reading every table of the database is not offered"]
        return out

    def topic(self, table: Table | None) -> str:
        return self.topic_prefix if table is None else self.topic_prefix + table.name


# ---- offsets ---------------------------------------------------------------------------------
def partition_of(table: Table | None) -> dict[str, str]:
    return dict(QUERY_PARTITION) if table is None else {"protocol": "1", "table": table.fqn}


def stored_offset(table: Table | None,
                  stored: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """The offset connect-offsets holds for a table (protocol v1, else v0), or {}."""
    wanted = [partition_of(table)] + ([{"table": table.name}] if table is not None else [])
    for want in wanted:
        for part, off in stored:
            if part == want and off:
                return dict(off)
    return {}


def timestamp_of(offset: Mapping[str, Any]) -> dt.datetime:
    """java.sql.Timestamp(timestamp) with setNanos(timestamp_nanos), as an aware datetime."""
    millis = int(offset.get("timestamp", 0))
    nanos = offset.get("timestamp_nanos")
    seconds = millis // 1000
    micros = (int(nanos) // 1000) if nanos is not None else (millis % 1000) * 1000
    return data.EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)


def timestamp_offset(when: dt.datetime) -> dict[str, int]:
    aware = when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
    delta = aware - data.EPOCH
    micros = delta // dt.timedelta(microseconds=1)
    seconds, within = divmod(micros, 1_000_000)
    return {"timestamp": seconds * 1000 + within // 1000, "timestamp_nanos": within * 1000}


def offset_errors(settings: SourceSettings, partition: dict[str, Any],
                  offset: dict[str, Any] | None) -> list[str]:
    """KIP-875: what a user may write as a JDBC source's offset."""
    if partition != QUERY_PARTITION and not (
            isinstance(partition.get("table"), str)
            and set(partition) <= {"table", "protocol"}
            and partition.get("protocol", "1") in ("0", "1")):
        return ['Source partitions for the JDBC source are {"protocol": "1", "table": '
                '"<schema>.<table>"}, {"table": "<table>"} or {"query": "query"}']
    if offset is None:
        return []
    known = {"incrementing", "timestamp", "timestamp_nanos"}
    bad = [k for k, v in offset.items()
           if k not in known or not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        return [f"Offsets for the JDBC source hold integer 'incrementing', 'timestamp' and "
                f"'timestamp_nanos' only, not {bad[0]!r}"]
    return []


# ---- SQL ---------------------------------------------------------------------------------------
def base_sql(table: Table | None, query: str) -> str:
    """What is read: the table, or the user's query as a subquery (so a WHERE can follow)."""
    if table is None:
        return f"SELECT * FROM ({query.rstrip().rstrip(';')}) AS odradek_query"
    return f"SELECT * FROM {table.sql}"


def _ts(settings: SourceSettings) -> str:
    cols = [quote(c) for c in settings.timestamps]
    return cols[0] if len(cols) == 1 else f"COALESCE({', '.join(cols)})"


def _after(settings: SourceSettings) -> str:
    """The rows after an offset (%(ts)s, %(id)s)."""
    ts, inc = _ts(settings) if settings.timestamps else "", quote(settings.incrementing)
    if settings.mode == "incrementing":
        return f"{inc} > %(id)s"
    if settings.mode == "timestamp":
        return f"{ts} > %(ts)s"
    return f"(({ts} = %(ts)s AND {inc} > %(id)s) OR {ts} > %(ts)s)"


def _order(settings: SourceSettings, descending: bool = False) -> str:
    way = " DESC" if descending else " ASC"
    keys = ([_ts(settings)] if settings.uses_timestamp else []) + \
        ([quote(settings.incrementing)] if settings.uses_incrementing else [])
    return ", ".join(k + way for k in keys)


def latest_sql(settings: SourceSettings, base: str) -> str:
    """The last (ts, id) of at most %(limit)s rows after the offset, below %(until)s."""
    keys = ([_ts(settings) + " AS odradek_ts"] if settings.uses_timestamp else []) + \
        ([quote(settings.incrementing) + " AS odradek_id"] if settings.uses_incrementing else [])
    where = _after(settings)
    if settings.uses_timestamp:
        where = f"{_ts(settings)} < %(until)s AND {where}"
    inner = (f"SELECT {', '.join(keys)} FROM ({base}) AS odradek_base WHERE {where} "
             f"ORDER BY {_order(settings)} LIMIT %(limit)s")
    last_keys = ([ "odradek_ts"] if settings.uses_timestamp else []) + \
        (["odradek_id"] if settings.uses_incrementing else [])
    return (f"SELECT {', '.join(last_keys)} FROM ({inner}) AS odradek_next ORDER BY "
            f"{', '.join(k + ' DESC' for k in last_keys)} LIMIT 1")


def range_sql(settings: SourceSettings, base: str) -> str:
    """The rows after the offset (%(ts)s, %(id)s) up to and with (%(end_ts)s, %(end_id)s)."""
    if settings.mode == "bulk":
        return base
    ts, inc = (_ts(settings) if settings.timestamps else ""), quote(settings.incrementing)
    if settings.mode == "incrementing":
        upto = f"{inc} <= %(end_id)s"
    elif settings.mode == "timestamp":
        upto = f"{ts} <= %(end_ts)s"
    else:
        upto = f"({ts} < %(end_ts)s OR ({ts} = %(end_ts)s AND {inc} <= %(end_id)s))"
    return (f"SELECT * FROM ({base}) AS odradek_base WHERE {_after(settings)} AND {upto} "
            f"ORDER BY {_order(settings)}")


def params(settings: SourceSettings, offset: Mapping[str, Any], naive_ts: bool) -> dict[str, Any]:
    """An offset as the statement's (%(ts)s, %(id)s) parameters."""
    out: dict[str, Any] = {}
    if settings.uses_incrementing:
        out["id"] = int(offset.get("incrementing", -1))
    if settings.uses_timestamp:
        when = timestamp_of(offset)
        out["ts"] = when.replace(tzinfo=None) if naive_ts else when
    return out


def end_params(settings: SourceSettings, end: Mapping[str, Any],
               naive_ts: bool) -> dict[str, Any]:
    return {f"end_{k}": v for k, v in params(settings, end, naive_ts).items()}


def offset_of(settings: SourceSettings, ts: Any, inc: Any) -> dict[str, int]:
    """The offset after a row with these (timestamp, incrementing) values."""
    out: dict[str, int] = {}
    if settings.uses_timestamp:
        if ts is None:
            raise DataError("Null value for the timestamp column(s) "
                            f"{', '.join(settings.timestamps)}")
        out.update(timestamp_offset(ts))
    if settings.uses_incrementing:
        out["incrementing"] = incrementing_value(inc, settings.incrementing)
    return out


def incrementing_value(value: Any, column: str) -> int:
    if value is None:
        raise DataError(f"Null value for incrementing column {column}")
    if isinstance(value, decimal.Decimal):
        if value != value.to_integral_value():
            raise DataError("Scale of Decimal value for incrementing column must be 0")
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise DataError(f"Invalid type for incrementing column: {type(value).__name__}")
    if value >= 1 << 63:
        raise DataError("Decimal value for incrementing column exceeded Long.MAX_VALUE")
    return value


# ---- columns -----------------------------------------------------------------------------------
# PostgreSQL type OIDs (pg_type) -> Connect types, as Confluent's PostgreSqlDatabaseDialect.
_TYPES = {16: "BOOLEAN", 17: "BYTES", 20: "INT64", 21: "INT16", 23: "INT32", 26: "INT64",
          700: "FLOAT32", 701: "FLOAT64", 18: "STRING", 19: "STRING", 25: "STRING",
          1042: "STRING", 1043: "STRING", 2950: "STRING", 114: "STRING", 3802: "STRING",
          142: "STRING", 869: "STRING", 650: "STRING", 829: "STRING"}
_LOGICAL = {1082: data.DATE, 1083: data.TIME, 1266: data.TIME, 1114: data.TIMESTAMP,
            1184: data.TIMESTAMP}
TIMESTAMP_OIDS = (1114, 1184)
NUMERIC = 1700


@dataclass(frozen=True)
class ColumnType:
    name: str
    oid: int
    scale: int | None  # NUMERIC's declared scale (None: unconstrained)
    nullable: bool = True


def column_schema(col: ColumnType) -> Schema:
    optional = col.nullable
    if col.oid == NUMERIC:
        if col.scale is None:
            raise DataError(f"Column {col.name} is an unconstrained NUMERIC: Connect's Decimal "
                            "needs one scale per column; declare NUMERIC(p,s) or read it through "
                            "`query` with a CAST")
        return Schema("BYTES", optional=optional, name=data.DECIMAL, version=1,
                      parameters=(("scale", str(col.scale)),))
    if col.oid in _LOGICAL:
        kind = "INT64" if col.oid in TIMESTAMP_OIDS else "INT32"
        return Schema(kind, optional=optional, name=_LOGICAL[col.oid], version=1)
    kind = _TYPES.get(col.oid)
    if kind is None:
        raise DataError(f"Column {col.name} has a PostgreSQL type (oid {col.oid}) the JDBC "
                        "source does not map; CAST it in a `query`")
    return Schema(kind, optional=optional)


def value_schema(columns: list[ColumnType], table: Table | None) -> Schema:
    return data.struct([(c.name, column_schema(c)) for c in columns],
                       name=None if table is None else table.name)


def connect_value(schema: Schema, value: Any) -> Any:
    """psycopg's value -> Connect's (naive timestamps are UTC; JSON and UUIDs as text)."""
    if value is None:
        return None
    if schema.name == data.TIMESTAMP and isinstance(value, dt.datetime):
        return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
    if schema.name == data.TIME and isinstance(value, dt.time):
        return value.replace(tzinfo=None)
    if schema.name == data.DECIMAL:
        scale = int(schema.params["scale"])
        return decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-scale))
    if schema.type == "STRING" and not isinstance(value, str):
        if isinstance(value, uuid.UUID):
            return str(value)
        if isinstance(value, dict | list | bool | int | float):
            return json.dumps(value, separators=(",", ":"))
        return str(value)
    if schema.type == "BYTES":
        return bytes(value)
    if schema.type in ("FLOAT32", "FLOAT64"):
        return float(value)
    return value


def row_value(schema: Schema, row: tuple[Any, ...]) -> dict[str, Any]:
    return {f.name: connect_value(f.schema, v) for f, v in zip(schema.fields, row, strict=True)}
