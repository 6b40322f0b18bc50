"""Debezium's PostgreSQL change events, built from decoded pgoutput messages, sans I/O.

Records are Debezium's: topic `<topic.prefix>.<schema>.<table>`, key a STRUCT of the primary
key columns (`<topic>.Key`; no key for a table without one), value the envelope
`<topic>.Envelope` with `before`, `after` (`<topic>.Value`), `source`
(io.debezium.connector.postgresql.Source), `op` (r snapshot read, c, u, d), `ts_ms` and
`transaction`. A delete is followed by a tombstone when `tombstones.on.delete` is true; an
update that changes the key is a delete (+ tombstone) of the old key and a create of the new,
as Debezium does. Truncates are skipped (Debezium's default `skipped.operations=t`).

Column types follow Debezium's defaults (`time.precision.mode=adaptive`,
`decimal.handling.mode=precise`); a type not mapped here is sent as its text form (STRING).
pgoutput does not say which columns are NOT NULL, so the key columns are required and every
other column optional.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from odradek.connect.connectors import pgoutput as po
from odradek.connect.data import ConnectRecord, DataError, Schema, decimal_schema, struct

CONNECTOR = "postgresql"
VERSION = "2.7.0.Final-odradek"  # the Debezium release whose event format this follows
UNAVAILABLE = "__debezium_unavailable_value"  # an unchanged TOASTed value, as Debezium marks it

OPT_INT64 = Schema("INT64", optional=True)
OPT_STRING = Schema("STRING", optional=True)
SOURCE = struct([
    ("version", Schema("STRING")), ("connector", Schema("STRING")), ("name", Schema("STRING")),
    ("ts_ms", Schema("INT64")),
    ("snapshot", Schema("STRING", optional=True, name="io.debezium.data.Enum", version=1,
                        default="false",
                        parameters=(("allowed", "true,last,false,incremental"),))),
    ("db", Schema("STRING")), ("sequence", OPT_STRING), ("schema", Schema("STRING")),
    ("table", Schema("STRING")), ("txId", OPT_INT64), ("lsn", OPT_INT64), ("xmin", OPT_INT64),
], name="io.debezium.connector.postgresql.Source")
TRANSACTION = struct([("id", Schema("STRING")), ("total_order", Schema("INT64")),
                      ("data_collection_order", Schema("INT64"))],
                     name="event.block", version=1, optional=True)

EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)


def _days(text: str) -> int:
    return (dt.date.fromisoformat(text) - EPOCH_DATE).days


def _micros(text: str) -> int:
    delta = dt.datetime.fromisoformat(text) - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _zoned(text: str) -> str:
    when = dt.datetime.fromisoformat(text).astimezone(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S") + (f".{when.microsecond:06d}".rstrip("0")
                                                 if when.microsecond else "") + "Z"


def _time_micros(text: str) -> int:
    t = dt.time.fromisoformat(text)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise DataError("bytea not in hex output format (bytea_output=hex expected)")
    return bytes.fromhex(text[2:])


def _bool(text: str) -> bool:
    # pgoutput sends the output function's t/f; the snapshot's ::text cast says true/false.
    return text in ("t", "true")


def _float(text: str) -> float:
    return float(text)


# type oid -> (Connect schema type, schema name, text parser)
TYPES: dict[int, tuple[str, str | None, Any]] = {
    16: ("BOOLEAN", None, _bool),
    21: ("INT16", None, int), 23: ("INT32", None, int), 20: ("INT64", None, int),
    26: ("INT64", None, int),
    700: ("FLOAT32", None, _float), 701: ("FLOAT64", None, _float),
    17: ("BYTES", None, _bytea),
    1082: ("INT32", "io.debezium.time.Date", _days),
    1083: ("INT64", "io.debezium.time.MicroTime", _time_micros),
    1114: ("INT64", "io.debezium.time.MicroTimestamp", _micros),
    1184: ("STRING", "io.debezium.time.ZonedTimestamp", _zoned),
    114: ("STRING", "io.debezium.data.Json", str), 3802: ("STRING", "io.debezium.data.Json", str),
    2950: ("STRING", "io.debezium.data.Uuid", str),
}
NUMERIC = 1700
VARIABLE_DECIMAL = "io.debezium.data.VariableScaleDecimal"


def column_schema(col: po.Column, decimal_mode: str, optional: bool) -> tuple[Schema, Any]:
    """(Connect schema, text -> value) for one column."""
    if col.type_oid == NUMERIC:
        if decimal_mode == "double":
            return Schema("FLOAT64", optional=optional), _float
        if decimal_mode == "string":
            return Schema("STRING", optional=optional), str
        if col.type_modifier >= 4:
            scale = (col.type_modifier - 4) & 0xFFFF
            schema = decimal_schema(scale, optional)
            schema = Schema(schema.type, optional, schema.name, schema.version,
                            parameters=(*schema.parameters, ("connect.decimal.precision",
                                                             str((col.type_modifier - 4) >> 16))))
            return schema, lambda text: _decimal(text, scale)
        schema = struct([("scale", Schema("INT32")), ("value", Schema("BYTES"))],
                        name=VARIABLE_DECIMAL, version=1, optional=optional)
        return schema, _variable_decimal
    kind, name, parse = TYPES.get(col.type_oid, ("STRING", None, str))
    return Schema(kind, optional=optional, name=name, version=1 if name else None), parse


def _decimal(text: str, scale: int) -> decimal.Decimal | None:
    value = decimal.Decimal(text)
    if not value.is_finite():
        return None  # NaN has no Decimal bytes; Debezium's precise mode sends null too
    return value.quantize(decimal.Decimal(1).scaleb(-scale))


def _variable_decimal(text: str) -> dict[str, Any] | None:
    value = decimal.Decimal(text)
    if not value.is_finite():
        return None
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    scale = max(0, -exponent)
    if exponent > 0:
        unscaled *= 10 ** exponent
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return {"scale": scale, "value": unscaled.to_bytes(size, "big", signed=True)}


@dataclass(frozen=True)
class Table:
    """One relation as its latest Relation message describes it, with its Connect schemas."""

    relation: po.Relation
    topic: str
    key_schema: Schema | None
    value_schema: Schema
    envelope: Schema
    parsers: tuple[Any, ...]
    key_index: tuple[int, ...]

    def row(self, values: po.Tuple) -> dict[str, Any]:
        cols = self.relation.columns
        if len(values) != len(cols):
            raise DataError(f"{self.topic}: a tuple of {len(values)} columns for a relation of "
                            f"{len(cols)}")
        out: dict[str, Any] = {}
        for col, text, parse, f in zip(cols, values, self.parsers, self.value_schema.fields,
                                       strict=True):
            if text is None:
                out[col.name] = None
            elif text is po.UNCHANGED:
                out[col.name] = UNAVAILABLE if f.schema.type == "STRING" else None
            else:
                assert isinstance(text, str)
                try:
                    out[col.name] = parse(text)
                except (ValueError, ArithmeticError) as exc:
                    raise DataError(f"{self.topic}: column {col.name} value {text!r}: "
                                    f"{exc}") from None
        return out

    def key(self, row: dict[str, Any]) -> dict[str, Any] | None:
        if self.key_schema is None:
            return None
        return {f.name: row[f.name] for f in self.key_schema.fields}


def table_of(relation: po.Relation, prefix: str, decimal_mode: str = "precise") -> Table:
    topic = f"{prefix}.{relation.namespace}.{relation.name}"
    fields, parsers, keys = [], [], []
    for i, col in enumerate(relation.columns):
        schema, parse = column_schema(col, decimal_mode, optional=not col.key)
        fields.append((col.name, schema))
        parsers.append(parse)
        if col.key:
            keys.append(i)
    value = struct(fields, name=f"{topic}.Value", optional=True)
    key = (struct([fields[i] for i in keys], name=f"{topic}.Key") if keys else None)
    envelope = struct([("before", value), ("after", value), ("source", SOURCE),
                       ("op", Schema("STRING")), ("ts_ms", OPT_INT64),
                       ("transaction", TRANSACTION)], name=f"{topic}.Envelope", version=1)
    return Table(relation, topic, key, value, envelope, tuple(parsers), tuple(keys))


@dataclass
class Position:
    """Where an event sits: its transaction's commit (end) LSN, xid and commit time."""

    lsn: int
    tx_id: int | None
    ts_us: int
    snapshot: str = "false"  # "true" / "last" for snapshot reads


class ChangeBuilder:
    """Debezium records from pgoutput messages (fed in order) or from snapshot rows."""

    def __init__(self, prefix: str, dbname: str, tombstones: bool = True,
                 decimal_mode: str = "precise",
                 include: Any = None) -> None:
        self.prefix = prefix
        self.dbname = dbname
        self.tombstones = tombstones
        self.decimal_mode = decimal_mode
        self.include = include  # (schema, table) -> bool; None: every table
        self.tables: dict[int, Table] = {}
        self.tx: po.Begin | None = None

    def relation(self, relation: po.Relation) -> Table:
        table = table_of(relation, self.prefix, self.decimal_mode)
        self.tables[relation.relid] = table
        return table

    def _table(self, relid: int) -> Table:
        table = self.tables.get(relid)
        if table is None:
            raise DataError(f"a change for relation {relid} before its Relation message")
        return table

    def _wanted(self, table: Table) -> bool:
        return self.include is None or self.include(table.relation.namespace,
                                                    table.relation.name)

    def source(self, table: Table, pos: Position) -> dict[str, Any]:
        return {"version": VERSION, "connector": CONNECTOR, "name": self.prefix,
                "ts_ms": pos.ts_us // 1000, "snapshot": pos.snapshot, "db": self.dbname,
                "sequence": None, "schema": table.relation.namespace,
                "table": table.relation.name, "txId": pos.tx_id, "lsn": pos.lsn, "xmin": None}

    def event(self, table: Table, op: str, before: dict[str, Any] | None,
              after: dict[str, Any] | None, pos: Position, now_ms: int) -> ConnectRecord:
        key = table.key(after if after is not None else before or {})
        value = {"before": before, "after": after, "source": self.source(table, pos), "op": op,
                 "ts_ms": now_ms, "transaction": None}
        return ConnectRecord(table.topic, None, table.key_schema, key, table.envelope, value)

    def tombstone(self, record: ConnectRecord) -> ConnectRecord:
        return ConnectRecord(record.topic, None, record.key_schema, record.key, None, None)

    def snapshot_row(self, table: Table, values: po.Tuple, pos: Position,
                     now_ms: int) -> ConnectRecord:
        return self.event(table, "r", None, table.row(values), pos, now_ms)

    def feed(self, msg: po.Message, pos: Position, now_ms: int) -> Iterator[ConnectRecord]:
        """The records one message makes (none for Begin, Commit, Relation...)."""
        if isinstance(msg, po.Relation):
            self.relation(msg)
        elif isinstance(msg, po.Insert):
            table = self._table(msg.relid)
            if self._wanted(table):
                yield self.event(table, "c", None, table.row(msg.new), pos, now_ms)
        elif isinstance(msg, po.Update):
            table = self._table(msg.relid)
            if not self._wanted(table):
                return
            after = table.row(msg.new)
            before = table.row(msg.old) if msg.old is not None else None
            if (before is not None and msg.old_is_key and table.key_schema is not None
                    and table.key(before) != table.key(after)):
                # The key changed: Debezium's delete of the old key, then a create.
                yield from self._delete(table, before, pos, now_ms)
                yield self.event(table, "c", None, after, pos, now_ms)
                return
            yield self.event(table, "u", None if msg.old_is_key else before, after, pos, now_ms)
        elif isinstance(msg, po.Delete):
            table = self._table(msg.relid)
            if self._wanted(table):
                yield from self._delete(table, table.row(msg.old), pos, now_ms)

    def _delete(self, table: Table, before: dict[str, Any], pos: Position,
                now_ms: int) -> Iterator[ConnectRecord]:
        record = self.event(table, "d", before, None, pos, now_ms)
        yield record
        if self.tombstones:
            yield self.tombstone(record)
