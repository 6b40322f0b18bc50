"""The JDBC sink's SQL for PostgreSQL, sans I/O: which columns a record has (as Confluent's
FieldsMetadata decides from `pk.mode` and `pk.fields`), the table to create or evolve, and
the statements `insert.mode` and `delete.enabled` ask for (as its PostgreSqlDatabaseDialect
writes them: quoted identifiers, `ON CONFLICT (...) DO UPDATE SET ... = EXCLUDED....`),
and the connection settings the JDBC source and sink share (`connection.url`, `.user`,
`.password`, and the psycopg arguments they give).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from odradek.connect import data
from odradek.connect.configdef import Field
from odradek.connect.data import ConnectRecord, DataError, Schema

KAFKA_PK = ("__connect_topic", "__connect_partition", "__connect_offset")
DEFAULT_KEY_COLUMN = "__connect_key"


def conninfo(config: Mapping[str, str]) -> dict[str, Any]:
    """`jdbc:postgresql://host:port/db?user=..&password=..` (and connection.user/password)
    as psycopg's connect() arguments; ValueError for another URL."""
    url = config.get("connection.url", "").strip()
    if not url.startswith("jdbc:postgresql://"):
        raise ValueError(f"Invalid value {url} for configuration connection.url: only "
                         "jdbc:postgresql:// URLs are supported here")
    parts = urlsplit(url[len("jdbc:"):])
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    out: dict[str, Any] = {"host": parts.hostname or "localhost", "port": parts.port or 5432,
                           "dbname": unquote(parts.path.lstrip("/")) or "postgres"}
    user = config.get("connection.user") or query.get("user")
    password = config.get("connection.password") or query.get("password")
    if user:
        out["user"] = user
    if password:
        out["password"] = password
    if "sslmode" in query:
        out["sslmode"] = query["sslmode"]
    return out


def _url_check(raw: str, config: Mapping[str, str]) -> list[str]:
    try:
        conninfo(config)
    except ValueError as exc:
        return [str(exc)]
    return []


def connection_fields(group: str) -> tuple[Field, ...]:
    """Confluent's connection.url/user/password, in the connector's own config group."""
    return (
        Field("connection.url", "STRING", None, "HIGH",
              "JDBC connection URL: jdbc:postgresql://host:port/database", group=group,
              check=_url_check),
        Field("connection.user", "STRING", "", "HIGH", "JDBC connection user.", group=group),
        Field("connection.password", "PASSWORD", "", "HIGH", "JDBC connection password.",
              group=group),
    )


def sql_type(schema: Schema) -> str:
    """PostgreSqlDatabaseDialect.getSqlType."""
    if schema.name == data.DECIMAL:
        return "DECIMAL"
    if schema.name == data.DATE:
        return "DATE"
    if schema.name == data.TIME:
        return "TIME"
    if schema.name == data.TIMESTAMP:
        return "TIMESTAMP"
    found = {"INT8": "SMALLINT", "INT16": "SMALLINT", "INT32": "INT", "INT64": "BIGINT",
             "FLOAT32": "REAL", "FLOAT64": "DOUBLE PRECISION", "BOOLEAN": "BOOLEAN",
             "STRING": "TEXT", "BYTES": "BYTEA"}.get(schema.type)
    if found is None:
        raise DataError(f"Unsupported type for column value: {schema.type}")
    return found


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_name(fmt: str, topic: str) -> str:
    return fmt.replace("${topic}", topic)


@dataclass(frozen=True)
class Column:
    name: str
    schema: Schema
    key: bool

    def ddl(self) -> str:
        null = "NOT NULL" if self.key or not self.schema.optional else "NULL"
        out = f"{quote(self.name)} {sql_type(self.schema)} {null}"
        return out


@dataclass(frozen=True)
class SinkSettings:
    pk_mode: str = "none"  # none | kafka | record_key | record_value
    pk_fields: tuple[str, ...] = ()
    insert_mode: str = "insert"  # insert | upsert | update
    delete_enabled: bool = False
    fields_whitelist: tuple[str, ...] = ()


def columns(settings: SinkSettings, record: ConnectRecord) -> list[Column]:
    """Key columns first, then the value's fields (FieldsMetadata.extract)."""
    out: list[Column] = []
    mode, pk = settings.pk_mode, settings.pk_fields
    value_schema = record.value_schema
    if mode == "kafka":
        names = pk or KAFKA_PK
        if len(names) != 3:
            raise DataError("PK mode for table is kafka so there should either be no field "
                            "names defined for defaults __connect_topic, __connect_partition, "
                            "__connect_offset to be used, or exactly 3")
        out += [Column(names[0], Schema("STRING"), True), Column(names[1], Schema("INT32"), True),
                Column(names[2], Schema("INT64"), True)]
    elif mode == "record_key":
        schema = record.key_schema
        if schema is None:
            raise DataError("PK mode for table is record_key, but record key schema is "
                            "missing")
        if schema.type == "STRUCT":
            names = pk or tuple(f.name for f in schema.fields)
            for name in names:
                f = schema.field(name)
                if f is None:
                    raise DataError(f"PK mode for table is record_key with configured PK "
                                    f"fields {list(pk)}, but record key schema does not "
                                    f"contain field: {name}")
                out.append(Column(name, f.schema, True))
        else:
            if len(pk) > 1:
                raise DataError(f"Need exactly one PK column defined since the key schema for "
                                f"records is a primitive type, defined columns are: {list(pk)}")
            out.append(Column(pk[0] if pk else DEFAULT_KEY_COLUMN, schema, True))
    elif mode == "record_value":
        if value_schema is None or value_schema.type != "STRUCT":
            raise DataError("PK mode for table is record_value, but record value schema is "
                            "missing or not a struct")
        names = pk or tuple(f.name for f in value_schema.fields)
        for name in names:
            f = value_schema.field(name)
            if f is None:
                raise DataError(f"PK mode for table is record_value with configured PK "
                                f"fields {list(pk)}, but record value schema does not "
                                f"contain field: {name}")
            out.append(Column(name, f.schema, True))
    if value_schema is not None:
        if value_schema.type != "STRUCT":
            raise DataError(f"Sink connector requires records with a Struct value schema, "
                            f"found {value_schema.type}")
        keys = {c.name for c in out}
        for f in value_schema.fields:
            if f.name in keys:
                continue
            if settings.fields_whitelist and f.name not in settings.fields_whitelist:
                continue
            out.append(Column(f.name, f.schema, False))
    return out


def row(settings: SinkSettings, record: ConnectRecord, cols: list[Column]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    kafka = iter((record.topic, record.partition, record.offset))
    for c in cols:
        if c.key and settings.pk_mode == "kafka":
            values[c.name] = next(kafka)
        elif c.key and settings.pk_mode == "record_key":
            key = record.key
            values[c.name] = key.get(c.name) if isinstance(key, dict) else key
        else:
            value = record.value or {}
            values[c.name] = value.get(c.name)
    return values


def create_table(table: str, cols: list[Column]) -> str:
    parts = [c.ddl() for c in cols]
    keys = [quote(c.name) for c in cols if c.key]
    if keys:
        parts.append(f"PRIMARY KEY({', '.join(keys)})")
    return f"CREATE TABLE {quote(table)} (\n" + ",\n".join(parts) + ")"


def alter_table(table: str, missing: list[Column]) -> list[str]:
    """auto.evolve: only optional fields (or with a default) can be added."""
    out = []
    for c in missing:
        if c.key or (not c.schema.optional and c.schema.default is None):
            raise DataError(f"Cannot ALTER TABLE {quote(table)} to add missing field "
                            f"{c.name}, as the field is not optional and does not have a "
                            "default value")
        out.append(f"ALTER TABLE {quote(table)} ADD {quote(c.name)} {sql_type(c.schema)} NULL")
    return out


def upsert_sql(settings: SinkSettings, table: str, cols: list[Column]) -> str:
    names = [c.name for c in cols]
    placeholders = ", ".join(f"%({i})s" for i in range(len(names)))
    target = ", ".join(quote(n) for n in names)
    insert = f"INSERT INTO {quote(table)} ({target}) VALUES ({placeholders})"
    if settings.insert_mode == "insert":
        return insert
    keys = [quote(c.name) for c in cols if c.key]
    others = [quote(c.name) for c in cols if not c.key]
    if settings.insert_mode == "upsert":
        if not keys:
            raise DataError("Write to table in UPSERT mode requires key field names to be "
                            "known, check the primary key configuration")
        if not others:
            return f"{insert} ON CONFLICT ({', '.join(keys)}) DO NOTHING"
        updates = ", ".join(f"{o}=EXCLUDED.{o}" for o in others)
        return f"{insert} ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    # update
    index = {c.name: i for i, c in enumerate(cols)}
    sets = ", ".join(f"{quote(c.name)} = %({index[c.name]})s" for c in cols if not c.key)
    where = " AND ".join(f"{quote(c.name)} = %({index[c.name]})s" for c in cols if c.key)
    return f"UPDATE {quote(table)} SET {sets} WHERE {where}"


def delete_sql(table: str, keys: list[Column]) -> str:
    where = " AND ".join(f"{quote(c.name)} = %({i})s" for i, c in enumerate(keys))
    return f"DELETE FROM {quote(table)} WHERE {where}"


def params(values: dict[str, Any], cols: list[Column]) -> dict[str, Any]:
    return {str(i): values[c.name] for i, c in enumerate(cols)}
