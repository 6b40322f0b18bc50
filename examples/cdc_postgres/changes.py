"""The change events of the CDC example: a Debezium-like JSON envelope, keyed by primary key.

    key   {"id": 42}
    value {"op": "c" | "u" | "d" | "r", "before": {...} | null, "after": {...} | null, "ts_ms": 1767225600000}
    value null                      a tombstone: the key was deleted (Debezium emits one after a delete
                                    so that compaction can drop the key)

`c` create, `u` update, `r` snapshot read: `after` is the full new row and is upserted.
`d` delete: `before` holds the old row (or only its key); the row goes. Only the key, the op
and `after` are used: the target needs no old image, so an envelope from any producer that
sends full rows works. The key's `id` is the primary key; it falls back to after.id / before.id
when a record has no key.

The table is declared once (`CUSTOMERS`): Spark parses with the same columns the PostgreSQL
table is created with.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import DataType, LongType, StringType, StructField, StructType

UPSERT_OPS = ("c", "u", "r")
DELETE_OP = "d"


@dataclass(frozen=True)
class Column:
    name: str
    spark_type: DataType
    pg_type: str


@dataclass(frozen=True)
class TableSpec:
    name: str
    key: str
    columns: tuple[Column, ...]

    @property
    def row_schema(self) -> StructType:
        return StructType([StructField(c.name, c.spark_type) for c in self.columns])

    @property
    def key_schema(self) -> StructType:
        return StructType([StructField(self.key, self.column(self.key).spark_type)])

    @property
    def envelope_schema(self) -> StructType:
        return StructType([
            StructField("op", StringType()),
            StructField("before", self.row_schema),
            StructField("after", self.row_schema),
            StructField("ts_ms", LongType()),
        ])

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


CUSTOMERS = TableSpec("customers", "id", (
    Column("id", LongType(), "bigint"),
    Column("name", StringType(), "text"),
    Column("email", StringType(), "text"),
    Column("tier", StringType(), "text"),
    Column("balance_cents", LongType(), "bigint"),
))
