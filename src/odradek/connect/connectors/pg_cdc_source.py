"""The PostgreSQL CDC connector's Spark streaming source: PostgreSQL I/O through psycopg 3.

Why psycopg 3 and the SQL interface of logical decoding, not psycopg2's replication
protocol: a Spark micro-batch is planned (`read`), written, then committed, and a planned
batch may have to be read again (`readBetweenOffsets`). `pg_logical_slot_peek_binary_changes`
with the pgoutput plugin returns the same pgoutput messages the streaming protocol carries,
but without consuming them: a batch is peeked, written to the topics, and only then is the
slot moved (`pg_replication_slot_advance`, the flush LSN of a standby's feedback), so the
slot keeps every change until the topics have it, and a re-read is just a second peek. It
needs no long-lived COPY BOTH connection in Spark's Python worker and no second PostgreSQL
driver (psycopg 3, already the project's, has no replication protocol support). The one
replication-protocol command needed, CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT, is sent
as a simple query on a `replication=database` connection through libpq.

Offsets (Spark's and, through `PgCdc.source_offset`, connect-offsets) are Debezium's:
`{"lsn": <end LSN of the last whole transaction sent>, "txId": .., "ts_usec": ..}`, with
`"snapshot": true, "last_snapshot_record": false` (and a row count) while the initial
snapshot runs. Batches end on transaction boundaries.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from odradek.connect.connectors import pgoutput as po
from odradek.connect.connectors.pg_cdc_records import ChangeBuilder, Position, Table

SCHEMA = "topic string, key binary, value binary, headers array<struct<key:string,value:binary>>"
BUSY_WAIT = 90.0  # how long a slot still held by a dead worker's session is waited for


class CdcError(RuntimeError):
    pass


def conninfo(config: dict[str, str], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"host": config.get("database.hostname", "localhost"),
                           "port": int(config.get("database.port", "5432")),
                           "dbname": config["database.dbname"],
                           "user": config.get("database.user", "postgres"),
                           "options": "-c TimeZone=UTC -c DateStyle=ISO -c bytea_output=hex "
                                      "-c extra_float_digits=3"}
    if config.get("database.password"):
        out["password"] = config["database.password"]
    out.update(extra)
    return out


def includer(config: dict[str, str]) -> Any:
    patterns = [re.compile(p.strip()) for p in config.get("table.include.list", "").split(",")
                if p.strip()]
    if not patterns:
        return None
    return lambda schema, table: any(p.fullmatch(f"{schema}.{table}") for p in patterns)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Postgres:
    """The connector's SQL against the source database."""

    def __init__(self, config: dict[str, str]) -> None:
        import psycopg

        self.config = config
        self.slot = config.get("slot.name", "debezium")
        self.publication = config.get("publication.name", "dbz_publication")
        self.conn = psycopg.connect(**conninfo(config), autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def slot_state(self) -> tuple[int, str] | None:
        row = self.conn.execute("SELECT confirmed_flush_lsn::text, plugin FROM "
                                "pg_replication_slots WHERE slot_name = %s AND database = "
                                "current_database()", (self.slot,)).fetchone()
        return None if row is None or row[0] is None else (po.parse_lsn(row[0]), row[1])

    def ensure_publication(self) -> None:
        mode = self.config.get("publication.autocreate.mode", "all_tables")
        found = self.conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                                  (self.publication,)).fetchone()
        if found:
            return
        if mode == "disabled":
            raise CdcError(f"publication {self.publication!r} does not exist and "
                           "publication.autocreate.mode is disabled")
        target = "ALL TABLES"
        if mode == "filtered":
            names = [f"{quote_ident(s)}.{quote_ident(t)}" for s, t in self.tables()]
            if not names:
                raise CdcError("publication.autocreate.mode=filtered: no table matches "
                               "table.include.list")
            target = "TABLE " + ", ".join(names)
        self.conn.execute(f"CREATE PUBLICATION {quote_ident(self.publication)} FOR {target}")

    def tables(self, conn: Any = None) -> list[tuple[str, str]]:
        wanted = includer(self.config)
        rows = (conn or self.conn).execute(
            "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON "
            "n.oid = c.relnamespace WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN "
            "('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%' "
            "ORDER BY 1, 2").fetchall()
        return [(s, t) for s, t in rows if wanted is None or wanted(s, t)]

    def create_slot(self) -> tuple[int, str | None, Any]:
        """A new slot (an old one of that name is dropped): (consistent point, exported
        snapshot name, the replication connection keeping that snapshot alive)."""
        import psycopg

        if self.slot_state() is not None:
            self.wait_free(lambda: self.conn.execute("SELECT pg_drop_replication_slot(%s)",
                                                     (self.slot,)))
        repl = psycopg.connect(**conninfo(self.config, replication="database"), autocommit=True)
        result = repl.pgconn.exec_(f"CREATE_REPLICATION_SLOT {quote_ident(self.slot)} LOGICAL "
                                   "pgoutput EXPORT_SNAPSHOT".encode())
        if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
            message = (result.error_message or b"").decode(errors="replace")
            repl.close()
            raise CdcError(f"CREATE_REPLICATION_SLOT {self.slot} failed: {message}")
        point = po.parse_lsn((result.get_value(0, 1) or b"").decode())
        snapshot = result.get_value(0, 2)
        return point, snapshot.decode() if snapshot else None, repl

    def wait_free(self, action: Any) -> Any:
        """Run `action`, waiting while the slot is still held by another session (a killed
        worker's backend lingers until PostgreSQL notices the closed socket)."""
        import psycopg

        deadline = time.monotonic() + BUSY_WAIT
        while True:
            try:
                return action()
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def advance(self, lsn: int) -> None:
        state = self.slot_state()
        if state is not None and lsn > state[0]:
            self.wait_free(lambda: self.conn.execute(
                "SELECT pg_replication_slot_advance(%s, %s::pg_lsn)",
                (self.slot, po.lsn_text(lsn))))

    def peek(self, limit: int) -> list[tuple[int, int, bytes]]:
        rows = self.wait_free(lambda: self.conn.execute(
            "SELECT lsn::text, xid::text::bigint, data FROM "
            "pg_logical_slot_peek_binary_changes(%s, NULL, %s, 'proto_version', '1', "
            "'publication_names', %s)",
            (self.slot, limit, quote_ident(self.publication))).fetchall())
        return [(po.parse_lsn(lsn), int(xid), bytes(data)) for lsn, xid, data in rows]


def relation_of(conn: Any, schema: str, table: str) -> po.Relation:
    """The Relation message pgoutput would send for a table, built from the catalog (the
    snapshot's rows need their schema before any change arrives)."""
    rows = conn.execute(
        "SELECT c.oid, a.attname, a.atttypid, a.atttypmod, "
        "coalesce(a.attnum = ANY(i.indkey), false) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped "
        "LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary "
        "WHERE n.nspname = %s AND c.relname = %s ORDER BY a.attnum", (schema, table)).fetchall()
    if not rows:
        raise CdcError(f"table {schema}.{table} not found")
    columns = tuple(po.Column(name, int(oid), int(mod), bool(key))
                    for _, name, oid, mod, key in rows)
    return po.Relation(int(rows[0][0]), schema, table, "d", columns)


class Snapshot:
    """The initial snapshot: every included table read in the slot's exported snapshot,
    through one cursor at a time."""

    def __init__(self, config: dict[str, str], snapshot_name: str | None,
                 builder: ChangeBuilder, pg: Postgres) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(**conninfo(config), autocommit=True)
        self.conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if snapshot_name:
            self.conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(
                sql.Literal(snapshot_name)))
        self.builder = builder
        self.pending = pg.tables(self.conn)
        self.table: Table | None = None

    def rows(self, limit: int) -> Iterator[tuple[Table, po.Tuple]]:
        """Up to `limit` rows; fewer only when the snapshot is done."""
        n = 0
        while n < limit:
            if self.table is None:
                if not self.pending:
                    return
                schema, name = self.pending.pop(0)
                self.table = self.builder.relation(relation_of(self.conn, schema, name))
                cols = ", ".join(f"{quote_ident(c.name)}::text"
                                 for c in self.table.relation.columns)
                self.conn.execute("CLOSE ALL")
                self.conn.execute(f"DECLARE snap NO SCROLL CURSOR FOR SELECT {cols} FROM "
                                  f"{quote_ident(schema)}.{quote_ident(name)}")
            fetched = self.conn.execute(f"FETCH {limit - n} FROM snap").fetchall()
            if not fetched:
                self.table = None
                continue
            for row in fetched:
                yield self.table, tuple(row)
            n += len(fetched)

    @property
    def done(self) -> bool:
        return self.table is None and not self.pending

    def close(self) -> None:
        self.conn.close()


class PgCdcReader(SimpleDataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.name = options["name"]
        self.config: dict[str, str] = json.loads(options["config"])
        self.worker: dict[str, str] = json.loads(options["worker"])
        self.stored: dict[str, Any] | None = json.loads(options.get("offset") or "null")
        self.batch = int(self.config.get("max.batch.size", "2048"))
        self.builder = ChangeBuilder(
            self.config["topic.prefix"], self.config["database.dbname"],
            tombstones=self.config.get("tombstones.on.delete", "true").lower() == "true",
            decimal_mode=self.config.get("decimal.handling.mode", "precise"),
            include=includer(self.config))
        self._pg: Postgres | None = None
        self._records: Any = None
        self.snapshot: Snapshot | None = None
        self._initial: dict[str, Any] | None = None

    @property
    def pg(self) -> Postgres:
        if self._pg is None:
            self._pg = Postgres(self.config)
        return self._pg

    def encode(self, records: list[Any]) -> list[tuple[Any, ...]]:
        if self._records is None:
            from odradek.connect.source_records import SourceRecords

            self._records = SourceRecords(self.name, self.config, self.worker)
        return [(r["topic"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
                for r in self._records.encode(records)]

    # ---- Spark's calls -----------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        # Spark asks more than once (planning the first batch, then reading it); the slot
        # and its snapshot are made once per reader.
        if self._initial is None:
            self._initial = self._initial_offset()
        return self._initial

    def _initial_offset(self) -> dict[str, Any]:
        pg = self.pg
        pg.ensure_publication()
        mode = self.config.get("snapshot.mode", "initial")
        stored = self.stored
        if stored is not None and not stored.get("snapshot"):
            state = pg.slot_state()
            if state is None:
                raise CdcError(f"replication slot {pg.slot!r} is gone: the changes after the "
                               f"stored LSN {po.lsn_text(int(stored['lsn']))} cannot be read "
                               "again; reset the connector's offsets to start over")
            pg.advance(int(stored["lsn"]))  # the topics have everything up to it
            return {"lsn": max(int(stored["lsn"]), state[0]), "txId": stored.get("txId"),
                    "ts_usec": stored.get("ts_usec")}
        if mode == "never":
            state = pg.slot_state()
            if state is None:
                point, _, repl = pg.create_slot()
                repl.close()
            else:
                point = state[0]
            return {"lsn": point, "txId": None, "ts_usec": int(time.time() * 1e6)}
        # No offsets, or a snapshot that did not finish: (again) a new slot and a snapshot.
        point, name, repl = pg.create_slot()
        try:
            self.snapshot = Snapshot(self.config, name, self.builder, pg)
        finally:
            repl.close()  # the snapshot is imported: the exporting session may end
        return {"lsn": point, "txId": None, "ts_usec": int(time.time() * 1e6),
                "snapshot": True, "last_snapshot_record": False, "rows": 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, Any]]:
        if start.get("snapshot"):
            return self._read_snapshot(start)
        # Spark plans a batch only after the one before is written: the topics have
        # everything up to `start`, so the slot may let go of it.
        self.pg.advance(int(start["lsn"]))
        rows, end = self._changes(int(start["lsn"]), self.batch)
        return iter(rows), end if end is not None else start

    def readBetweenOffsets(self, start: dict[str, Any],
                           end: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
        if start.get("snapshot") or end.get("snapshot"):
            raise CdcError("a snapshot batch cannot be read twice (its snapshot has ended); "
                           "restart the connector to take the snapshot again")
        # Not yet advanced past `start` (the batch was not written): peek again.
        rows: list[tuple[Any, ...]] = []
        at = int(start["lsn"])
        while at < int(end["lsn"]):
            more, stop = self._changes(at, self.batch, until=int(end["lsn"]))
            if stop is None:
                raise CdcError(f"changes up to {po.lsn_text(int(end['lsn']))} are no longer "
                               "in the replication slot")
            rows += more
            at = int(stop["lsn"])
        return iter(rows)

    def commit(self, end: dict[str, Any]) -> None:
        if not end.get("snapshot"):
            self.pg.advance(int(end["lsn"]))

    def stop(self) -> None:
        if self.snapshot is not None:
            self.snapshot.close()
        if self._pg is not None:
            self._pg.close()

    # ---- the two phases ----------------------------------------------------------------------
    def _read_snapshot(self, start: dict[str, Any]) -> tuple[Iterator[Any], dict[str, Any]]:
        if self.snapshot is None:
            raise CdcError("the snapshot's session is gone (the Spark worker restarted); "
                           "restart the connector to take the snapshot again")
        now_ms = int(time.time() * 1000)
        pos = Position(int(start["lsn"]), None, int(start["ts_usec"]), "true")
        records = [self.builder.snapshot_row(table, values, pos, now_ms)
                   for table, values in self.snapshot.rows(self.batch)]
        count = int(start.get("rows", 0)) + len(records)
        if self.snapshot.done:
            self.snapshot.close()
            self.snapshot = None
            if records:
                last = records[-1]
                value = dict(last.value)
                value["source"] = {**value["source"], "snapshot": "last"}
                records[-1] = last.new(value=value)
            end = {"lsn": int(start["lsn"]), "txId": None, "ts_usec": int(start["ts_usec"])}
        else:
            end = {**start, "rows": count}
        return iter(self.encode(records)), end

    def _changes(self, after: int, limit: int,
                 until: int | None = None) -> tuple[list[tuple[Any, ...]], dict[str, Any] | None]:
        """The records of the whole transactions committed after LSN `after` (at most about
        `limit` messages; whole transactions), and the offset after the last one."""
        out: list[Any] = []
        tx: list[Any] = []
        end: dict[str, Any] | None = None
        begin: po.Begin | None = None
        now_ms = int(time.time() * 1000)
        for lsn, _xid, data in self.pg.peek(limit):
            msg = po.decode(data)
            if isinstance(msg, po.Begin):
                begin, tx = msg, []
            elif isinstance(msg, po.Commit):
                if msg.end_lsn > after and (until is None or msg.end_lsn <= until):
                    out += tx
                    end = {"lsn": msg.end_lsn, "txId": begin.xid if begin else None,
                           "ts_usec": msg.commit_ts_us}
                begin, tx = None, []
            else:
                pos = Position(lsn, begin.xid if begin else None,
                               begin.commit_ts_us if begin else 0)
                # Relation messages are applied even in transactions already sent: they
                # carry the schema the following changes are decoded with.
                tx += self.builder.feed(msg, pos, now_ms)
        return self.encode(out), end


class PgCdcSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek_connect_pg_cdc"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> PgCdcReader:
        return PgCdcReader(dict(self.options))
