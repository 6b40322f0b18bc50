"""Issue 17: the Schema Registry's REST API and `_schemas` storage, against a real node and a
real `odradek registry serve` process, driven with confluent-kafka's own registry client."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker import BrokerProcess, free_port

CT = "application/vnd.schemaregistry.v1+json"


class RegistryProcess:
    """One `odradek registry serve` process on a free port."""

    def __init__(self, bootstrap: str, log_path: Path, port: int | None = None) -> None:
        self.bootstrap = bootstrap
        self.port = port or free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.extra_args: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> RegistryProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.cli.main", "registry", "serve", "-b", self.bootstrap,
             "--listeners", self.url, *self.extra_args], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"registry exited {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port),
                                                                        0.2):
                return self
            time.sleep(0.05)
        raise TimeoutError(f"registry did not listen:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def call(self, method: str, path: str, body: Any = None,
             raw: bytes | None = None, ctype: str = CT) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": ctype, "Accept": CT})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, text.decode(errors="replace")


@contextlib.contextmanager
def running_registry(bootstrap: str, tmp_path: Path, name: str = "registry"
                     ) -> Iterator[RegistryProcess]:
    reg = RegistryProcess(bootstrap, tmp_path / f"{name}.log").start()
    try:
        yield reg
    finally:
        reg.stop()


@pytest.fixture
def registry(broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        yield reg


def avro_record(name: str, fields: list[dict[str, Any]]) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "test", "fields": fields})


USER_V1 = avro_record("User", [{"name": "name", "type": "string"}])
USER_V2 = avro_record("User", [{"name": "name", "type": "string"},
                               {"name": "age", "type": "int", "default": 0}])
USER_BAD = avro_record("User", [{"name": "name", "type": "string"},
                                {"name": "email", "type": "string"}])  # no default


def test_confluent_client_register_get_lookup(registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry.url})
    first = client.register_schema("users-value", Schema(USER_V1, "AVRO"))
    second = client.register_schema("users-value", Schema(USER_V2, "AVRO"))
    assert second != first
    # The same schema in another subject gets the same id; registering it again is a no-op.
    assert client.register_schema("other-value", Schema(USER_V1, "AVRO")) == first
    assert client.register_schema("users-value", Schema(USER_V1, "AVRO")) == first
    assert sorted(client.get_subjects()) == ["other-value", "users-value"]
    assert client.get_versions("users-value") == [1, 2]
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, second)
    assert json.loads(latest.schema.schema_str) == json.loads(USER_V2)
    assert json.loads(client.get_schema(first).schema_str) == json.loads(USER_V1)
    found = client.lookup_schema("users-value", Schema(USER_V1, "AVRO"))
    assert (found.version, found.schema_id) == (1, first)
    assert "AVRO" in client.get_schema_types()
    assert sorted(client.get_subjects_by_schema_id(first)) == ["other-value", "users-value"]
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility("users-value", "FULL")
    assert client.get_compatibility("users-value") == "FULL"


def test_incompatible_schema_gets_409(registry: RegistryProcess) -> None:
    assert registry.call("POST", "/subjects/s/versions", {"schema": USER_V1})[0] == 200
    status, body = registry.call("POST", "/subjects/s/versions", {"schema": USER_BAD})
    assert status == 409 and body["error_code"] == 409, body
    assert "email" in body["message"]
    status, body = registry.call("POST", "/compatibility/subjects/s/versions/latest?verbose=true",
                                 {"schema": USER_BAD})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    status, body = registry.call("POST", "/compatibility/subjects/s/versions/1",
                                 {"schema": USER_V2})
    assert (status, body) == (200, {"is_compatible": True})
    # NONE lets it in; the versions are unchanged by the refused register.
    assert registry.call("GET", "/subjects/s/versions") == (200, [1])
    assert registry.call("PUT", "/config/s", {"compatibility": "NONE"}) == (
        200, {"compatibility": "NONE"})
    status, body = registry.call("POST", "/subjects/s/versions", {"schema": USER_BAD})
    assert status == 200 and isinstance(body["id"], int)


def test_error_codes(registry: RegistryProcess) -> None:
    assert registry.call("GET", "/subjects/nope/versions")[1]["error_code"] == 40401
    registry.call("POST", "/subjects/s/versions", {"schema": USER_V1})
    status, body = registry.call("GET", "/subjects/s/versions/7")
    assert (status, body["error_code"]) == (404, 40402)
    status, body = registry.call("GET", "/schemas/ids/999")
    assert (status, body["error_code"]) == (404, 40403)
    status, body = registry.call("POST", "/subjects/s", {"schema": USER_V2})
    assert (status, body["error_code"]) == (404, 40403)
    status, body = registry.call("POST", "/subjects/s/versions", {"schema": "{not avro"})
    assert (status, body["error_code"]) == (422, 42201)
    status, body = registry.call("POST", "/subjects/s/versions",
                                 {"schema": json.dumps({"type": "record", "name": "R"})})
    assert (status, body["error_code"]) == (422, 42201)
    status, body = registry.call("GET", "/subjects/s/versions/zero")
    assert (status, body["error_code"]) == (422, 42202)
    status, body = registry.call("PUT", "/config", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    status, body = registry.call("GET", "/config/s")
    assert (status, body["error_code"]) == (404, 40408)
    status, _ = registry.call("POST", "/subjects/s/versions", raw=b"{bad json")
    assert status == 400
    status, _ = registry.call("POST", "/subjects/s/versions", raw=b"x" * (5 * 1024 * 1024))
    assert status == 413
    # None of the bad requests changed anything.
    assert registry.call("GET", "/subjects") == (200, ["s"])
    assert registry.call("GET", "/subjects/s/versions") == (200, [1])
    assert registry.call("GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})


def test_deletes_soft_and_permanent(registry: RegistryProcess) -> None:
    registry.call("POST", "/subjects/d/versions", {"schema": USER_V1})
    registry.call("POST", "/subjects/d/versions", {"schema": USER_V2})
    # Permanent before soft is refused.
    assert registry.call("DELETE", "/subjects/d/versions/1?permanent=true")[1]["error_code"] \
        == 40407
    assert registry.call("DELETE", "/subjects/d/versions/1") == (200, 1)
    assert registry.call("GET", "/subjects/d/versions") == (200, [2])
    assert registry.call("GET", "/subjects/d/versions?deleted=true") == (200, [1, 2])
    assert registry.call("DELETE", "/subjects/d?permanent=true")[1]["error_code"] == 40405
    assert registry.call("DELETE", "/subjects/d") == (200, [2])
    assert registry.call("GET", "/subjects") == (200, [])
    assert registry.call("GET", "/subjects?deleted=true") == (200, ["d"])
    assert registry.call("DELETE", "/subjects/d")[1]["error_code"] == 40404
    assert registry.call("DELETE", "/subjects/d?permanent=true") == (200, [1, 2])
    assert registry.call("GET", "/subjects?deleted=true") == (200, [])
    assert registry.call("GET", "/subjects/d/versions")[1]["error_code"] == 40401


def test_restart_reads_schemas_back(broker: BrokerProcess, tmp_path: Path) -> None:
    with running_registry(broker.bootstrap, tmp_path, "first") as reg:
        ids = {s: reg.call("POST", f"/subjects/{s}/versions", {"schema": schema})[1]["id"]
               for s, schema in (("a", USER_V1), ("b", USER_V2))}
        reg.call("POST", "/subjects/a/versions", {"schema": USER_V2})
        reg.call("PUT", "/config/a", {"compatibility": "FORWARD"})
        reg.call("DELETE", "/subjects/b")
    assert reg.proc is not None and reg.proc.returncode == 0, reg.log()  # SIGTERM: clean exit
    with running_registry(broker.bootstrap, tmp_path, "second") as reg:
        assert reg.call("GET", "/subjects") == (200, ["a"])
        assert reg.call("GET", "/subjects?deleted=true") == (200, ["a", "b"])
        assert reg.call("GET", "/subjects/a/versions/1")[1]["id"] == ids["a"]
        assert reg.call("GET", "/subjects/a/versions/2")[1]["id"] == ids["b"]
        assert reg.call("GET", "/config/a") == (200, {"compatibilityLevel": "FORWARD"})
        # A new schema gets an id above every id read back.
        third = avro_record("Other", [{"name": "x", "type": "long"}])
        new_id = reg.call("POST", "/subjects/c/versions", {"schema": third})[1]["id"]
        assert new_id > max(ids.values())


def test_references_mode_and_unknown_paths(registry: RegistryProcess) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "test",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "test",
                         "fields": [{"name": "home", "type": "test.Address"}]})
    addr_id = registry.call("POST", "/subjects/address/versions", {"schema": address})[1]["id"]
    refs = [{"name": "test.Address", "subject": "address", "version": 1}]
    # Without the reference the type is unknown; with it the schema parses.
    assert registry.call("POST", "/subjects/person/versions",
                         {"schema": person})[1]["error_code"] == 42201
    status, body = registry.call("POST", "/subjects/person/versions",
                                 {"schema": person, "references": refs})
    assert status == 200 and body["id"] != addr_id
    person_id = body["id"]
    assert registry.call("GET", "/subjects/person/versions/1")[1]["references"] == refs
    assert registry.call("GET", "/subjects/address/versions/1/referencedby") == (200, [person_id])
    bad_ref = [{"name": "test.Address", "subject": "address", "version": 9}]
    assert registry.call("POST", "/subjects/p2/versions",
                         {"schema": person, "references": bad_ref})[1]["error_code"] == 42201

    assert registry.call("GET", "/mode") == (200, {"mode": "READWRITE"})
    assert registry.call("PUT", "/mode", {"mode": "SIDEWAYS"})[1]["error_code"] == 42204
    assert registry.call("PUT", "/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = registry.call("POST", "/subjects/x/versions", {"schema": USER_V1})
    assert (status, body["error_code"]) == (422, 42205)
    assert registry.call("PUT", "/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    assert registry.call("POST", "/subjects/x/versions", {"schema": USER_V1})[0] == 200

    status, body = registry.call("GET", "/no/such/path")
    assert (status, body["error_code"]) == (404, 404)


def test_metadata_and_rule_set_are_stored_and_returned(registry: RegistryProcess) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    metadata = {"properties": {"owner": "team-a"}}
    rule_set = {"domainRules": [{"name": "r1", "kind": "CONDITION", "mode": "WRITE",
                                 "type": "CEL", "expr": "message.name != ''"}]}
    status, body = registry.call("POST", "/subjects/m/versions",
                                 {"schema": USER_V1, "metadata": metadata, "ruleSet": rule_set})
    assert status == 200
    with_rules = body["id"]
    # The same text without them is another schema (another id, another version).
    plain = registry.call("POST", "/subjects/m/versions", {"schema": USER_V1})[1]["id"]
    assert plain != with_rules
    got = registry.call("GET", "/subjects/m/versions/1")[1]
    assert (got["metadata"], got["ruleSet"]) == (metadata, rule_set)
    assert registry.call("GET", f"/schemas/ids/{with_rules}")[1]["metadata"] == metadata
    client = SchemaRegistryClient({"url": registry.url})
    fetched = client.get_schema(with_rules)
    assert fetched.metadata is not None and fetched.metadata.properties.to_dict() == {
        "owner": "team-a"}
    assert registry.call("POST", "/subjects/m/versions",
                         {"schema": USER_V1, "metadata": [1]})[1]["error_code"] == 42201


def test_import_mode_keeps_the_callers_ids_across_a_restart(broker: BrokerProcess,
                                                            tmp_path: Path) -> None:
    with running_registry(broker.bootstrap, tmp_path, "first") as reg:
        # Importing: the caller's ids and versions, no compatibility check.
        assert reg.call("PUT", "/mode", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
        assert reg.call("POST", "/subjects/imp/versions",
                        {"schema": USER_V1, "id": 1000, "version": 3}) == (200, {"id": 1000})
        assert reg.call("POST", "/subjects/imp/versions",
                        {"schema": USER_BAD, "id": 1001, "version": 4}) == (200, {"id": 1001})
        status, body = reg.call("POST", "/subjects/other/versions",
                                {"schema": USER_V2, "id": 1000})
        assert (status, body["error_code"]) == (422, 42207), body
        status, body = reg.call("POST", "/subjects/imp/versions",
                                {"schema": USER_V2, "id": 1002, "version": 4})
        assert (status, body["error_code"]) == (422, 42205), body
        assert reg.call("PUT", "/mode", {"mode": "READWRITE"})[0] == 200
        # Outside IMPORT an id may not be given; IMPORT again needs force on a used registry.
        status, body = reg.call("POST", "/subjects/x/versions", {"schema": USER_V2, "id": 5})
        assert (status, body["error_code"]) == (422, 42205), body
        assert reg.call("PUT", "/mode", {"mode": "IMPORT"})[1]["error_code"] == 42205
        assert reg.call("PUT", "/mode/fresh", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
        assert reg.call("DELETE", "/mode/fresh") == (200, {"mode": "IMPORT"})
        assert reg.call("GET", "/mode/fresh") == (200, {"mode": "READWRITE"})
    with running_registry(broker.bootstrap, tmp_path, "second") as reg:
        assert reg.call("GET", "/subjects/imp/versions") == (200, [3, 4])
        assert reg.call("GET", "/subjects/imp/versions/3")[1]["id"] == 1000
        assert reg.call("GET", "/schemas/ids/1001/versions") == (
            200, [{"subject": "imp", "version": 4}])
        # New ids continue above the imported ones.
        third = avro_record("Other", [{"name": "x", "type": "long"}])
        assert reg.call("POST", "/subjects/c/versions", {"schema": third}) == (200, {"id": 1002})
