"""Issue 19: a Connect worker against a real node: Kafka Connect's REST API (status codes and
error bodies), its three topics in Kafka's record formats, and connectors running as Spark
queries that move data end to end (FileStreamSource -> topic -> FileStreamSink and the
Parquet lake sink), resuming from connect-offsets after a pause and a restart.

The node, its worker (`connect.listeners`: one SparkSession inside that child) and
PostgreSQL are the Connect modules' shared ones (tests/support/connect.py); a second worker
(`odradek connect serve`) joins the group over the node's SASL_PLAINTEXT listener with
--command-config. That the node starts its worker again after a kill -9 is shown by
test_connect_cdc.py, whose kill is that worker's.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_support import odradek, ok
from tests.integration.connect_support import ConnectApi, ConnectProcess, NodeWorker, wait_for
from tests.support.broker import ODRADEK, BrokerProcess, free_port
from tests.support.connect import JAAS, ConnectPorts
from tests.support.postgres import PostgresServer

pytestmark = pytest.mark.timeout(900)  # Spark starting on a loaded 2-core machine

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
# A killed worker's connectors move once its session lapses: keep that short.
GROUP_TIMEOUTS = ["--set", "session.timeout.ms=6000", "--set", "heartbeat.interval.ms=1000"]


@pytest.fixture
def shared_broker(connect_node: BrokerProcess) -> BrokerProcess:
    return connect_node  # the Connect modules' node (tests/support/connect.py)


@pytest.fixture
def registry_url(connect_ports: ConnectPorts) -> str:
    return connect_ports.registry_url


@pytest.fixture
def sasl_port(connect_ports: ConnectPorts) -> int:
    return connect_ports.sasl


@pytest.fixture
def postgres(connect_postgres: PostgresServer) -> PostgresServer:
    return connect_postgres


def read_topic(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of every partition of `topic`, in partition then offset order."""
    from confluent_kafka import TopicPartition

    from odradek.client import admin_client, consumer

    parts = admin_client(bootstrap).list_topics(topic, timeout=30).topics[topic].partitions
    out = []
    c = consumer(bootstrap)
    try:
        for p in sorted(parts):
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            got = 0
            while got < high - low:
                msg = c.poll(10)
                assert msg is not None, f"{topic}-{p}: no record at {low + got} of {high}"
                assert not msg.error(), msg.error()
                out.append((msg.key(), msg.value()))
                got += 1
    finally:
        c.close()
    return out


def latest(records: list[tuple[bytes | None, bytes | None]]) -> dict[str, Any]:
    """A compacted topic's view: key -> last value (JSON), tombstones removing."""
    view: dict[str, Any] = {}
    for key, value in records:
        assert key is not None
        if value is None:
            view.pop(key.decode(), None)
        else:
            view[key.decode()] = json.loads(value)
    return view


def state_of(connect: ConnectApi, name: str) -> tuple[str, list[str]] | None:
    code, body = connect.call("GET", f"/connectors/{name}/status")
    if code != 200:
        return None
    return body["connector"]["state"], [t["state"] for t in body["tasks"]]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


# ---- the REST API without running anything ---------------------------------------------------
def test_root_plugins_and_validation(connect: NodeWorker) -> None:
    code, root = connect.call("GET", "/")
    assert code == 200 and root["version"] and root["kafka_cluster_id"]
    code, plugins = connect.call("GET", "/connector-plugins")
    assert code == 200
    assert {p["class"]: p["type"] for p in plugins} == {
        SOURCE: "source", SINK: "sink", "odradek.connect.lake.LakeSinkConnector": "sink",
        "io.confluent.connect.jdbc.JdbcSinkConnector": "sink",
        "io.confluent.connect.jdbc.JdbcSourceConnector": "source",
        "org.apache.kafka.connect.mirror.MirrorSourceConnector": "source",
        "org.apache.kafka.connect.mirror.MirrorCheckpointConnector": "source",
        "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector": "source",
        "io.debezium.connector.postgresql.PostgresConnector": "source"}
    code, defs = connect.call("GET", "/connector-plugins/FileStreamSource/config")
    assert code == 200 and {"file", "topic", "batch.size", "tasks.max"} <= {d["name"] for d in defs}

    code, result = connect.call("PUT", "/connector-plugins/FileStreamSource/config/validate",
                                {"connector.class": "FileStreamSource", "file": "/x",
                                 "tasks.max": "0"})
    assert code == 200 and result["name"] == SOURCE
    errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"]}
    assert errors["topic"] == ['Missing required configuration "topic" which has no default value.']
    assert errors["tasks.max"] == ["Invalid value 0 for configuration tasks.max: Value must be at least 1"]
    assert result["error_count"] == 3  # topic, tasks.max and the missing name
    assert {"Common", "File"} <= set(result["groups"])
    field = next(c["definition"] for c in result["configs"] if c["definition"]["name"] == "topic")
    assert field["required"] is True and field["importance"] == "HIGH"

    code, result = connect.call("PUT", "/connector-plugins/FileStreamSink/config/validate",
                                {"connector.class": SINK, "name": "s", "file": "/x"})
    assert code == 200 and result["error_count"] == 2
    errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"]}
    assert errors["topics"] == ["Must configure one of topics or topics.regex"]

    code, body = connect.call("PUT", "/connector-plugins/NoSuchThing/config/validate", {})
    assert code == 400 and body["error_code"] == 400


def test_errors_have_connects_shape(connect: NodeWorker, tmp_path: Path) -> None:
    for method, path in (("GET", "/connectors/nope"), ("GET", "/connectors/nope/config"),
                         ("GET", "/connectors/nope/status"), ("GET", "/connectors/nope/tasks"),
                         ("GET", "/connectors/nope/offsets"), ("PUT", "/connectors/nope/pause"),
                         ("DELETE", "/connectors/nope"), ("POST", "/connectors/nope/restart")):
        assert connect.call(method, path) == (404, {"error_code": 404,
                                                    "message": "Connector nope not found"}), path
    code, body = connect.call("GET", "/no/such/path")
    assert code == 404 and body["error_code"] == 404
    code, body = connect.call("DELETE", "/connector-plugins")
    assert code == 405 and body["error_code"] == 405
    code, body = connect.call("POST", "/connectors", raw=b"{not json")
    assert code == 400 and body["error_code"] == 400
    code, body = connect.call("POST", "/connectors", {"name": "bad", "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt")}})
    assert code == 400
    assert body["message"].startswith("Connector configuration is invalid and contains the "
                                      "following 1 error(s):\ntopic: Missing required")
    code, body = connect.call("POST", "/connectors", {"name": "bad", "config": {
        "connector.class": "NoSuchConnector"}})
    assert code == 400 and "NoSuchConnector" in body["message"]
    code, body = connect.call("PUT", "/connectors/a/config", {
        "name": "b", "connector.class": "FileStreamSource", "topic": "t", "file": "/x"})
    assert code == 400 and body["message"] == ("Connector name configuration (b) doesn't match "
                                               "connector name in the URL (a)")
    assert connect.call("GET", "/connectors/bad")[0] == 404
    code, body = connect.call("POST", "/connectors", {"name": "bad", "config": {
        "connector.class": "FileStreamSink", "file": "/x", "topics": "t",
        "value.converter": "com.example.NoSuchConverter"}})
    assert (code, body) == (400, {"error_code": 400, "message": (
        "Connector configuration is invalid and contains the following 1 error(s):\n"
        "value.converter: Invalid value com.example.NoSuchConverter for configuration "
        "value.converter: Class com.example.NoSuchConverter could not be found.\n"
        "You can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`")})
    # Bodies of the wrong shape are refused with 400, and the worker stays up.
    for method, path, raw in (("POST", "/connectors", b"[1]"),
                              ("POST", "/connectors", b'{"name": "x", "config": "text"}'),
                              ("POST", "/connectors", b'{"name": "x", "config": {},'
                                                      b' "initial_state": "FLYING"}'),
                              ("PUT", "/connectors/x/config", b'"text"'),
                              ("PUT", "/connector-plugins/FileStreamSink/config/validate", b"7"),
                              ("POST", "/connectors/x/restart?includeTasks=maybe", b"")):
        code, body = connect.call(method, path, raw=raw)
        assert code in (400, 404) and body["error_code"] == code, (path, raw, body)
    assert connect.call("GET", "/")[0] == 200


def test_stopped_connector_offsets_kip875(connect: NodeWorker, tmp_path: Path,
                                          shared_broker: BrokerProcess) -> None:
    """Created STOPPED, nothing runs; its offsets are written and reset through the API and
    land in connect-offsets in Kafka's shape; the config topic holds Kafka's records."""
    source = tmp_path / "in.txt"
    config = {"connector.class": "FileStreamSource", "file": str(source), "topic": "t-stopped"}
    code, info = connect.call("POST", "/connectors", {"name": "parked", "config": config,
                                                      "initial_state": "STOPPED"})
    assert code == 201, info
    assert info == {"name": "parked", "config": {**config, "name": "parked"}, "tasks": [],
                    "type": "source"}
    assert connect.call("POST", "/connectors", {"name": "parked", "config": config}) == (
        409, {"error_code": 409, "message": "Connector parked already exists"})
    wait_for("STOPPED", lambda: state_of(connect, "parked") == ("STOPPED", []),
             log=connect.log)
    assert connect.call("GET", "/connectors/parked/offsets") == (200, {"offsets": []})

    at = {"partition": {"filename": str(source)}, "offset": {"position": 5}}
    code, body = connect.call("PATCH", "/connectors/parked/offsets", {"offsets": [at]})
    assert (code, body) == (200, {"message": "The offsets for this connector have been "
                                             "altered successfully"})
    assert connect.call("GET", "/connectors/parked/offsets") == (200, {"offsets": [at]})
    bad = {"partition": {"filename": str(source)}, "offset": {"position": -1}}
    code, body = connect.call("PATCH", "/connectors/parked/offsets", {"offsets": [bad]})
    assert code == 400 and "non-negative" in body["message"]

    view = latest(read_topic(shared_broker.bootstrap, "connect-configs"))
    assert view["connector-parked"] == {"properties": {**config, "name": "parked"}}
    assert view["target-state-parked"] == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert view["commit-parked"] == {"tasks": 0}
    offsets = read_topic(shared_broker.bootstrap, "connect-offsets")
    assert (json.dumps(["parked", {"filename": str(source)}], separators=(",", ":")).encode(),
            b'{"position":5}') in offsets
    status = latest(read_topic(shared_broker.bootstrap, "connect-status"))
    assert status["status-connector-parked"]["state"] == "STOPPED"
    assert status["status-connector-parked"]["worker_id"] == f"127.0.0.1:{connect.port}"

    # The command line over the same API.
    listed = json.loads(ok("connect", "list", "--url", connect.url, "--format", "json"))
    assert listed == [{"name": "parked", "type": "source", "state": "STOPPED", "tasks": None,
                       "worker": f"127.0.0.1:{connect.port}"}]
    shown = json.loads(ok("connect", "offsets", "parked", "--url", connect.url, "--format", "json"))
    assert shown == [{"partition": json.dumps({"filename": str(source)}),
                      "offset": '{"position": 5}'}]
    refused = odradek("connect", "status", "nope", "--url", connect.url)
    assert refused.returncode == 1 and "Connector nope not found (404)" in refused.stderr

    assert connect.call("DELETE", "/connectors/parked/offsets") == (
        200, {"message": "The offsets for this connector have been reset successfully"})
    assert connect.call("GET", "/connectors/parked/offsets") == (200, {"offsets": []})
    assert connect.call("DELETE", "/connectors/parked") == (204, None)
    wait_for("the connector gone", lambda: connect.call("GET", "/connectors") == (200, []))
    # Its statuses are tombstoned (Kafka writes DESTROYED as null).
    wait_for("status tombstones", lambda: "status-connector-parked" not in latest(
        read_topic(shared_broker.bootstrap, "connect-status")))


# ---- connectors moving data through Spark ----------------------------------------------------
def test_file_source_to_file_and_parquet_sinks(connect: NodeWorker, tmp_path: Path,
                                               shared_broker: BrokerProcess) -> None:
    source, sink, lake = tmp_path / "test.txt", tmp_path / "test.sink.txt", tmp_path / "lake"
    source.write_text("zero\none\ntwo\n")
    # Started STOPPED with its offset past the first line: the query must begin there.
    src = {"connector.class": "FileStreamSource", "file": str(source), "topic": "quick"}
    assert connect.call("POST", "/connectors", {"name": "src", "config": src,
                                                "initial_state": "STOPPED"})[0] == 201
    wait_for("src STOPPED", lambda: state_of(connect, "src") == ("STOPPED", []), log=connect.log)
    assert connect.call("PATCH", "/connectors/src/offsets", {"offsets": [
        {"partition": {"filename": str(source)}, "offset": {"position": len("zero\n")}}]})[0] == 200
    assert connect.call("PUT", "/connectors/src/resume") == (202, None)
    code, info = connect.call("PUT", "/connectors/sink/config", {
        "connector.class": "FileStreamSink", "file": str(sink), "topics": "quick"})
    assert code == 201 and info["tasks"] == [{"connector": "sink", "task": 0}]
    code, info = connect.call("POST", "/connectors", {"name": "lake", "config": {
        "connector.class": "odradek.connect.lake.LakeSinkConnector", "topics": "quick",
        "path": str(lake), "tasks.max": "2"}})
    assert code == 201 and len(info["tasks"]) == 2

    wait_for("two lines in the sink file", lambda: lines(sink) == ["one", "two"],
             timeout=300, log=connect.log)
    assert state_of(connect, "src") == ("RUNNING", ["RUNNING"])
    assert state_of(connect, "sink") == ("RUNNING", ["RUNNING"])
    # The worker's default converter is JsonConverter with schemas, as the quickstart shows.
    values = [v for _, v in read_topic(shared_broker.bootstrap, "quick")]
    assert values == [b'{"schema":{"type":"string","optional":false},"payload":"one"}',
                      b'{"schema":{"type":"string","optional":false},"payload":"two"}']

    with source.open("a") as out:
        out.write("three\n")
    wait_for("a streamed line", lambda: lines(sink) == ["one", "two", "three"], log=connect.log)
    size = source.stat().st_size
    wait_for("the source offset", lambda: connect.call("GET", "/connectors/src/offsets") == (
        200, {"offsets": [{"partition": {"filename": str(source)},
                           "offset": {"position": size}}]}), log=connect.log)
    wait_for("the sink offset", lambda: connect.call("GET", "/connectors/sink/offsets") == (
        200, {"offsets": [{"partition": {"kafka_topic": "quick", "kafka_partition": 0},
                           "offset": {"kafka_offset": 3}}]}), log=connect.log)

    # Paused, the file grows; resumed, the query starts again from connect-offsets: the new
    # line arrives once, nothing before it again.
    assert connect.call("PUT", "/connectors/src/pause") == (202, None)
    wait_for("src PAUSED", lambda: state_of(connect, "src") == ("PAUSED", ["PAUSED"]),
             log=connect.log)
    with source.open("a") as out:
        out.write("four\n")
    assert connect.call("PUT", "/connectors/src/resume") == (202, None)
    wait_for("the line written while paused", lambda: lines(sink) == [
        "one", "two", "three", "four"], log=connect.log)
    # A restart of the sink (a new query, from the group's offsets, once they hold the last
    # batch: before that a restart would repeat it, at-least-once) repeats nothing either.
    wait_for("the sink offset after four", lambda: connect.call(
        "GET", "/connectors/sink/offsets")[1]["offsets"][0]["offset"] == {"kafka_offset": 4},
        log=connect.log)
    assert connect.call("POST", "/connectors/sink/restart") == (204, None)
    with source.open("a") as out:
        out.write("five\n")
    wait_for("a line after the restart", lambda: lines(sink) == [
        "one", "two", "three", "four", "five"], log=connect.log)

    import pyarrow.dataset as ds

    def lake_values() -> list[str]:
        if not lake.exists():
            return []
        table = ds.dataset(str(lake), format="parquet").to_table()
        return [v for _, v in sorted(zip(table["offset"].to_pylist(),
                                         table["value"].to_pylist(), strict=True))]

    wait_for("the lake's rows", lambda: lake_values() == ["one", "two", "three", "four", "five"],
             log=connect.log)

    # A sink that cannot write fails its task, with the error as the trace.
    code, _ = connect.call("POST", "/connectors", {"name": "broken", "config": {
        "connector.class": "FileStreamSink", "file": str(tmp_path), "topics": "quick"}})
    assert code == 201
    wait_for("the task FAILED", lambda: state_of(connect, "broken") == ("RUNNING", ["FAILED"]),
             log=connect.log)
    task = connect.call("GET", "/connectors/broken/tasks/0/status")[1]
    assert task["state"] == "FAILED" and "IsADirectoryError" in task["trace"]
    code, body = connect.call("POST", "/connectors/broken/restart?includeTasks=true&onlyFailed=true")
    assert code == 202 and body["tasks"][0]["state"] == "RESTARTING"
    assert body["connector"]["state"] == "RUNNING"
    for name in ("src", "sink", "lake", "broken"):
        assert connect.call("DELETE", f"/connectors/{name}") == (204, None)


# ---- converters, transforms and the dead letter queue ----------------------------------------
def test_avro_transforms_and_dead_letter_queue(connect: NodeWorker, tmp_path: Path,
                                               shared_broker: BrokerProcess,
                                               registry_url: str) -> None:
    """A FileStreamSource whose lines are hoisted into a struct, given a field and written
    as Avro through the node's registry; a FileStreamSink reading them back with the Avro
    converter through a chain (Filter on tombstones, MaskField, InsertField, ReplaceField);
    a record that is not Avro goes to the DLQ with its headers and Kafka's context headers,
    and the connector keeps running."""
    T = "org.apache.kafka.connect.transforms."
    source, sink = tmp_path / "orders.txt", tmp_path / "orders.sink.txt"
    source.write_text("foo\nbar\n")
    avro = {"value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry_url}
    code, body = connect.call("POST", "/connectors", {"name": "orders-src", "config": {
        "connector.class": "FileStreamSource", "file": str(source), "topic": "orders", **avro,
        "transforms": "MakeMap,InsertSource",
        "transforms.MakeMap.type": T + "HoistField$Value", "transforms.MakeMap.field": "line",
        "transforms.InsertSource.type": T + "InsertField$Value",
        "transforms.InsertSource.static.field": "origin",
        "transforms.InsertSource.static.value": "file"}})
    assert code == 201, body
    code, body = connect.call("POST", "/connectors", {"name": "orders-sink", "config": {
        "connector.class": "FileStreamSink", "file": str(sink), "topics": "orders", **avro,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true",
        "transforms": "dropDeletes,mask,where,rename",
        "transforms.dropDeletes.type": T + "Filter",
        "transforms.dropDeletes.predicate": "isTombstone",
        "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "origin",
        "transforms.mask.replacement": "****",
        "transforms.where.type": T + "InsertField$Value",
        "transforms.where.topic.field": "topic", "transforms.where.offset.field": "offset",
        "transforms.rename.type": T + "ReplaceField$Value",
        "transforms.rename.renames": "line:text",
        "predicates": "isTombstone",
        "predicates.isTombstone.type": T + "predicates.RecordIsTombstone"}})
    assert code == 201, body

    def sunk() -> list[dict[str, Any]]:
        return [json.loads(line) for line in lines(sink)]

    expect = [{"text": "foo", "origin": "****", "topic": "orders", "offset": 0},
              {"text": "bar", "origin": "****", "topic": "orders", "offset": 1}]
    wait_for("the Avro records through the chain", lambda: sunk() == expect, timeout=300,
             log=connect.log)
    with urllib.request.urlopen(f"{registry_url}/subjects", timeout=30) as resp:
        assert "orders-value" in json.loads(resp.read())

    from odradek.client import producer

    p = producer(shared_broker.bootstrap)
    p.produce("orders", key=b"k", value=b"not avro", headers=[("trace", b"t-1")])
    p.produce("orders", key=b"gone", value=None)  # a tombstone: filtered, not an error
    assert p.flush(30) == 0
    with source.open("a") as out:
        out.write("baz\n")
    wait_for("a record after the bad one", lambda: sunk() == [
        *expect, {"text": "baz", "origin": "****", "topic": "orders", "offset": 4}],
        log=connect.log)
    assert state_of(connect, "orders-sink") == ("RUNNING", ["RUNNING"])

    from confluent_kafka import TopicPartition

    from odradek.client import consumer

    c = consumer(shared_broker.bootstrap)
    try:
        c.assign([TopicPartition("orders-dlq", 0, 0)])
        msg = wait_for("the dead letter", lambda: c.poll(1), log=connect.log)
    finally:
        c.close()
    assert (msg.key(), msg.value()) == (b"k", b"not avro")
    headers = dict(msg.headers())
    assert headers["trace"] == b"t-1"
    assert {k: headers[k] for k in (
        "__connect.errors.topic", "__connect.errors.partition", "__connect.errors.offset",
        "__connect.errors.connector.name", "__connect.errors.task.id",
        "__connect.errors.stage", "__connect.errors.class.name",
        "__connect.errors.exception.class.name", "__connect.errors.exception.message")} == {
        "__connect.errors.topic": b"orders", "__connect.errors.partition": b"0",
        "__connect.errors.offset": b"2", "__connect.errors.connector.name": b"orders-sink",
        "__connect.errors.task.id": b"0", "__connect.errors.stage": b"VALUE_CONVERTER",
        "__connect.errors.class.name": b"io.confluent.connect.avro.AvroConverter",
        "__connect.errors.exception.class.name":
            b"org.apache.kafka.connect.errors.DataException",
        "__connect.errors.exception.message": b"Unknown magic byte!"}
    assert b"Unknown magic byte!" in headers["__connect.errors.exception.stacktrace"]
    for name in ("orders-src", "orders-sink"):
        assert connect.call("DELETE", f"/connectors/{name}") == (204, None)


# ---- the JDBC sink into PostgreSQL -----------------------------------------------------------
def json_record(schema: dict[str, Any], payload: Any) -> bytes | None:
    """What JsonConverter with schemas writes (the worker's default converter)."""
    if payload is None:
        return None
    return json.dumps({"schema": schema, "payload": payload}).encode()


def test_jdbc_sink_upserts_and_deletes_into_postgres(connect: NodeWorker,
                                                     shared_broker: BrokerProcess,
                                                     postgres: PostgresServer) -> None:
    """Confluent's JdbcSinkConnector config, word for word: upserts keyed by the record key,
    tombstones deleting rows, the table created from the value's schema."""
    import psycopg

    dsn = postgres.create_database("connect_sink")
    key_schema = {"type": "struct", "optional": False,
                  "fields": [{"type": "int32", "optional": False, "field": "id"}]}
    value_schema = {"type": "struct", "optional": False, "name": "customer", "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "string", "optional": True, "field": "email"},
        {"type": "bytes", "optional": True, "field": "balance",
         "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
         "parameters": {"scale": "2"}}]}
    changes = [(1, {"id": 1, "name": "ann", "email": None, "balance": "AMg="}),  # 2.00
               (2, {"id": 2, "name": "bob", "email": "b@x", "balance": None}),
               (3, {"id": 3, "name": "cy", "email": None, "balance": None}),
               (2, {"id": 2, "name": "bobby", "email": "b@y", "balance": None}),
               (3, None),
               (4, {"id": 4, "name": "dee", "email": None, "balance": None})]
    from odradek.client import producer

    p = producer(shared_broker.bootstrap)
    for key, value in changes:
        p.produce("customers", key=json_record(key_schema, {"id": key}),
                  value=json_record(value_schema, value))
    assert p.flush(30) == 0
    code, body = connect.call("POST", "/connectors", {"name": "jdbc", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "tasks.max": "1",
        "topics": "customers",
        "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/connect_sink",
        "connection.user": "postgres", "insert.mode": "upsert", "pk.mode": "record_key",
        "pk.fields": "id", "delete.enabled": "true", "auto.create": "true",
        "table.name.format": "kafka_${topic}"}})
    assert code == 201, body

    def table() -> list[tuple[Any, ...]] | None:
        try:
            with psycopg.connect(dsn) as conn:
                return conn.execute('SELECT id, name, email, balance FROM "kafka_customers" '
                                    "ORDER BY id").fetchall()
        except psycopg.errors.UndefinedTable:
            return None

    import decimal

    want = [(1, "ann", None, decimal.Decimal("2.00")), (2, "bobby", "b@y", None),
            (4, "dee", None, None)]
    wait_for("the table equal to the changes", lambda: table() == want, timeout=300,
             log=connect.log)
    with psycopg.connect(dsn) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            "WHERE table_name = 'kafka_customers' ORDER BY ordinal_position").fetchall()
    assert columns == [("id", "integer", "NO"), ("name", "text", "NO"),
                       ("email", "text", "YES"), ("balance", "numeric", "YES")]
    assert state_of(connect, "jdbc") == ("RUNNING", ["RUNNING"])
    # bad configs refused with the connector's own words
    code, body = connect.call("PUT", "/connector-plugins/JdbcSink/config/validate", {
        "connector.class": "JdbcSink", "name": "x", "topics": "t", "delete.enabled": "true",
        "connection.url": "jdbc:mysql://h/db"})
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["delete.enabled"] == ["Deletes are only supported for pk.mode record_key"]
    assert "only jdbc:postgresql://" in errors["connection.url"][0]
    assert connect.call("DELETE", "/connectors/jdbc") == (204, None)


def test_jdbc_sink_evolves_the_table(postgres: PostgresServer) -> None:
    """auto.evolve: a record whose schema has a new optional field adds the column (ALTER
    TABLE ... ADD ... NULL), older rows keep NULL there; a new required field without a
    default is refused, as Confluent refuses it. The sink's writer against the real
    PostgreSQL, without a Spark query around it."""
    import psycopg

    from odradek.connect import data
    from odradek.connect.connectors.jdbc_sink import TableWriter
    from odradek.connect.data import ConnectRecord, DataError, Schema

    postgres.create_database("connect_evolve")
    writer = TableWriter({
        "connection.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/connect_evolve",
        "connection.user": "postgres", "insert.mode": "upsert", "pk.mode": "record_value",
        "pk.fields": "id", "auto.create": "true", "auto.evolve": "true"})
    v1 = data.struct([("id", Schema("INT32")), ("name", Schema("STRING"))], name="row")
    v2 = data.struct([("id", Schema("INT32")), ("name", Schema("STRING")),
                      ("note", Schema("STRING", optional=True))], name="row")
    writer.write([ConnectRecord("rows", 0, None, None, v1, {"id": 1, "name": "a"}, offset=0)])
    writer.write([ConnectRecord("rows", 0, None, None, v2, {"id": 2, "name": "b", "note": "n"},
                                offset=1)])
    with psycopg.connect(postgres.dsn("connect_evolve")) as conn:
        assert conn.execute("SELECT id, name, note FROM rows ORDER BY id").fetchall() == [
            (1, "a", None), (2, "b", "n")]
    v3 = data.struct([*((f.name, f.schema) for f in v2.fields), ("qty", Schema("INT32"))])
    with pytest.raises(DataError, match="as the field is not optional"):
        writer.write([ConnectRecord("rows", 0, None, None, v3,
                                    {"id": 3, "name": "c", "note": None, "qty": 1}, offset=2)])


# ---- the JDBC source from PostgreSQL ---------------------------------------------------------
def test_jdbc_source_ranges_in_each_mode(postgres: PostgresServer) -> None:
    """The JDBC source's reads against the real PostgreSQL, without Spark around them: in
    each mode, a micro-batch's range (at most batch.max.rows rows on, chosen first, then
    read) gives the rows inserted or updated since the last offset, each once; rows that
    share a timestamp are never split; bulk reads the whole table."""
    import psycopg

    from odradek.connect.connectors.jdbc_source_reader import Source, connect, resolve_tables
    from odradek.connect.connectors.jdbc_source_sql import SourceSettings

    postgres.create_database("connect_ranges")
    url = f"jdbc:postgresql://127.0.0.1:{postgres.port}/connect_ranges"
    with psycopg.connect(postgres.dsn("connect_ranges"), autocommit=True) as admin:
        admin.execute("SET TIME ZONE 'UTC'")
        admin.execute("CREATE TABLE t (id SERIAL PRIMARY KEY, name TEXT, "
                      "updated TIMESTAMP NOT NULL DEFAULT now())")
        admin.execute("INSERT INTO t (name) VALUES ('a'), ('b'), ('c')")  # one timestamp

        def drain(mode: str, offset: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
            settings = SourceSettings.of({
                "mode": mode, "incrementing.column.name": "id", "batch.max.rows": "2",
                "timestamp.column.name": "updated", "table.whitelist": "t"})
            got: list[str] = []
            with connect({"connection.url": url, "connection.user": "postgres"}) as conn:
                source = Source(conn, settings, resolve_tables(conn, ["t"])[0])
                for _ in range(10):
                    end = source.end_of_next(conn, offset, settings.batch_max_rows)
                    if end == offset and mode != "bulk":
                        return got, offset
                    names = [row[1] for row in source.rows(conn, offset, end)]
                    if mode == "timestamp":
                        assert names, "a range that moved has rows"
                    got += names
                    offset = end
                    if mode == "bulk":
                        return got, offset
            raise AssertionError(f"{mode}: no end after 10 batches")

        offsets: dict[str, dict[str, Any]] = {}
        for mode in ("incrementing", "timestamp", "timestamp+incrementing"):
            got, offsets[mode] = drain(mode, {})
            assert got == ["a", "b", "c"], mode
        assert offsets["incrementing"] == {"incrementing": 3}
        assert drain("bulk", {})[0] == ["a", "b", "c"]
        # the same three rows share a timestamp: timestamp mode read them in one range
        admin.execute("INSERT INTO t (name) VALUES ('d')")
        admin.execute("UPDATE t SET name = 'B', updated = now() WHERE name = 'b'")
        assert drain("incrementing", offsets["incrementing"])[0] == ["d"]
        assert drain("timestamp", offsets["timestamp"])[0] == ["d", "B"]
        assert drain("timestamp+incrementing", offsets["timestamp+incrementing"])[0] == [
            "d", "B"]
        assert drain("bulk", {})[0] == ["a", "c", "d", "B"]


def test_jdbc_source_modes_and_resume(connect: NodeWorker, shared_broker: BrokerProcess,
                                      postgres: PostgresServer) -> None:
    """Confluent's JdbcSourceConnector as the worker runs it (incrementing, and
    timestamp+incrementing on a timestamptz column, side by side): rows there before the
    start, inserted and updated after it each arrive once; stopped and resumed
    (incrementing), it goes on from connect-offsets (Confluent's offset format) without a
    gap or a repeat, with the column the table grew meanwhile. (Each mode's statements
    against PostgreSQL: test_jdbc_source_ranges_in_each_mode.)"""

    import psycopg

    dsn = postgres.create_database("connect_source")
    url = f"jdbc:postgresql://127.0.0.1:{postgres.port}/connect_source"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("CREATE TABLE inc_t (id SERIAL PRIMARY KEY, name TEXT NOT NULL)")
        conn.execute("CREATE TABLE tsi_t (id SERIAL PRIMARY KEY, name TEXT, "
                     "updated TIMESTAMPTZ NOT NULL DEFAULT now())")
        for name in ("a", "b"):
            conn.execute("INSERT INTO inc_t (name) VALUES (%s)", (name,))
            conn.execute("INSERT INTO tsi_t (name) VALUES (%s)", (name,))
    base = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": url, "connection.user": "postgres", "topic.prefix": "pg-",
            "poll.interval.ms": "500", "batch.max.rows": "2"}
    configs = {
        "src-inc": {**base, "mode": "incrementing", "incrementing.column.name": "id",
                    "table.whitelist": "inc_t"},
        "src-tsi": {**base, "mode": "timestamp+incrementing", "incrementing.column.name": "id",
                    "timestamp.column.name": "updated", "table.whitelist": "tsi_t"}}
    for name, config in configs.items():
        code, body = connect.call("POST", "/connectors", {"name": name, "config": config})
        assert code == 201, body

    def names(topic: str) -> list[str] | None:
        try:
            rows = read_topic(shared_broker.bootstrap, topic)
        except KeyError:
            return None  # not created yet
        return [json.loads(v)["payload"]["name"] for _, v in rows if v is not None]

    for topic in ("pg-inc_t", "pg-tsi_t"):
        wait_for(f"the rows there before the start in {topic}",
                 lambda t=topic: names(t) == ["a", "b"], timeout=300, log=connect.log)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        for name in ("c", "d", "e"):
            conn.execute("INSERT INTO inc_t (name) VALUES (%s)", (name,))
            conn.execute("INSERT INTO tsi_t (name) VALUES (%s)", (name,))
        conn.execute("UPDATE tsi_t SET name = 'A', updated = now() WHERE name = 'a'")
    wait_for("the inserted rows", lambda: names("pg-inc_t") == list("abcde"), log=connect.log)
    wait_for("inserts and the update", lambda: names("pg-tsi_t") == [*"abcde", "A"],
             log=connect.log)
    # A record is the row: a struct named after its table, with the columns' types.
    _, value = read_topic(shared_broker.bootstrap, "pg-tsi_t")[0]
    record = json.loads(value)
    assert record["schema"]["name"] == "tsi_t"
    assert [(f["field"], f["type"], f["optional"], f.get("name"))
            for f in record["schema"]["fields"]] == [
        ("id", "int32", False, None), ("name", "string", True, None),
        ("updated", "int64", False, "org.apache.kafka.connect.data.Timestamp")]

    def stored(name: str) -> list[dict[str, Any]]:
        return connect.call("GET", f"/connectors/{name}/offsets")[1]["offsets"]

    wait_for("the incrementing offset stored", lambda: stored("src-inc") == [
        {"partition": {"protocol": "1", "table": "public.inc_t"},
         "offset": {"incrementing": 5}}], log=connect.log)
    tsi = wait_for("the timestamp offsets", lambda: (stored("src-tsi") or [None])[0])
    assert tsi["partition"] == {"protocol": "1", "table": "public.tsi_t"}
    assert set(tsi["offset"]) == {"incrementing", "timestamp", "timestamp_nanos"}

    # Stopped, rows added, resumed: it goes on after row 5, once each.
    assert connect.call("PUT", "/connectors/src-inc/stop")[0] == 204
    wait_for("src-inc stopped", lambda: (state_of(connect, "src-inc") or ("",))[0] == "STOPPED",
             log=connect.log)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE inc_t ADD COLUMN note TEXT")
        conn.execute("INSERT INTO inc_t (name, note) VALUES ('f', 'new'), ('g', NULL)")
    assert connect.call("PUT", "/connectors/src-inc/resume")[0] == 202
    wait_for("the rows after the resume", lambda: names("pg-inc_t") == list("abcdefg"),
             log=connect.log)
    _, value = read_topic(shared_broker.bootstrap, "pg-inc_t")[5]
    assert json.loads(value)["payload"] == {"id": 6, "name": "f", "note": "new"}

    code, body = connect.call("PUT", "/connector-plugins/JdbcSource/config/validate", {
        "connector.class": "JdbcSource", "name": "x", "connection.url": url,
        "topic.prefix": "p", "mode": "timestamp"})
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert errors["timestamp.column.name"] == [
        "Mode timestamp requires timestamp.column.name to be set"]
    assert "Set table.whitelist" in errors["table.whitelist"][0]
    for name in configs:
        assert connect.call("DELETE", f"/connectors/{name}") == (204, None)


# ---- several workers in one group ------------------------------------------------------------
def test_two_workers_share_connectors_and_take_over(connect: NodeWorker, tmp_path: Path,
                                                    sasl_port: int) -> None:
    """A second worker in the group gets connectors through JoinGroup/SyncGroup; killed with
    SIGKILL, its connectors come back to the first once its session lapses. Connectors are
    created STOPPED: their owner reports them (status worker_id) without starting Spark."""
    names = [f"g{i}" for i in range(4)]
    for name in names:
        code, _ = connect.call("POST", "/connectors", {"name": name, "initial_state": "STOPPED",
                                                       "config": {"connector.class": "FileStreamSink",
                                                                  "file": str(tmp_path / name),
                                                                  "topics": "quick"}})
        assert code == 201

    def owners() -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for name in names:
            code, body = connect.call("GET", f"/connectors/{name}/status")
            ok = code == 200 and body["connector"]["state"] == "STOPPED"
            out[name] = body["connector"]["worker_id"] if ok else None
        return out

    first = f"127.0.0.1:{connect.port}"
    wait_for("the first worker owning all", lambda: set(owners().values()) == {first},
             log=connect.log)
    # The second worker reaches the node only through its SASL listener, with Kafka's client
    # settings in a --command-config file: its topics' clients and its group connection
    # authenticate (a plaintext client there would be refused).
    settings = tmp_path / "client.properties"
    settings.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        f"sasl.jaas.config={JAAS}\n")
    second = ConnectProcess(f"127.0.0.1:{sasl_port}", tmp_path,
                            extra=[*GROUP_TIMEOUTS, "--command-config", str(settings)]).start()
    try:
        other = f"127.0.0.1:{second.port}"

        def both() -> dict[str, str | None] | None:
            now = owners()
            return now if set(now.values()) == {first, other} else None

        spread = wait_for("connectors spread over both workers", both,
                          log=lambda: connect.log() + second.log())
        assert sorted(spread.values()).count(other) == 2  # round-robin over two members
        # Either worker answers for every connector (the state is the topics').
        assert second.call("GET", "/connectors")[1] == sorted(names)
        assert second.proc is not None
        second.proc.kill()
        second.proc.wait()
        wait_for("the survivor owning all again", lambda: set(owners().values()) == {first},
                 log=connect.log)
    finally:
        second.stop()
    for name in names:
        assert connect.call("DELETE", f"/connectors/{name}") == (204, None)


# ---- the node's worker (connect.listeners) ---------------------------------------------------
def test_unusable_settings_refuse_the_start(tmp_path: Path) -> None:
    """A connect.listeners port in use: the node refuses to start in one line (the other
    refusals: tests/unit/cli/test_connect_service.py); `connect serve` refuses security
    settings its clients cannot honour."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def serve(*sets: str) -> subprocess.CompletedProcess[str]:
        # admin.listeners off: its default port (9644) may be taken by another test's node
        args = [a for item in ("schema.registry.listeners=", "console.listeners=",
                               "admin.listeners=",
                               f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", *sets)
                for a in ("--set", item)]
        return subprocess.run([*ODRADEK, "serve", "--data-dir", str(tmp_path / "d"), *args],
                              capture_output=True, text=True, timeout=60, env=env)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        result = serve(f"connect.listeners=http://127.0.0.1:{taken.getsockname()[1]}")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "connect.listeners" in result.stderr and "in use" in result.stderr

    refused = subprocess.run([*ODRADEK, "connect", "serve", "-b", "127.0.0.1:1",
                              "-X", "security.protocol=SASL_SSL",
                              "-X", "sasl.mechanism=GSSAPI"],
                             capture_output=True, text=True, timeout=60, env=env)
    assert refused.returncode == 2 and "SASL PLAIN, SCRAM" in refused.stderr, refused.stderr
