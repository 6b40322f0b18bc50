"""Issue 17: `odradek serve` runs the Schema Registry beside its node
(schema.registry.listeners), started once the node serves, restarted if it dies, and gone with
the node; confluent-kafka's serializers use it unchanged."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.broker import ODRADEK, BrokerProcess, free_port

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _subjects(url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(f"{url}/subjects", timeout=5) as resp:
            return list(json.loads(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _registry_pids(node: BrokerProcess) -> list[int]:
    return [int(p) for p in re.findall(r"Schema Registry on \S+ \(pid (\d+)\)", node.log())]


def _wait(cond, what: str, timeout: float = 90.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"gave up waiting for {what}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def _start(tmp_path: Path, name: str) -> tuple[BrokerProcess, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    node = BrokerProcess(tmp_path / name, settings={"schema.registry.listeners": url})
    node.start(timeout=120)
    _wait(lambda: _subjects(url) is not None, f"the registry at {url}")
    return node, url


@pytest.mark.timeout(240)
def test_serve_runs_the_registry_that_confluent_serializers_use(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    node, url = _start(tmp_path, "n")
    try:
        schema = json.dumps({"type": "record", "name": "Click", "fields": [
            {"name": "page", "type": "string"}, {"name": "n", "type": "int"}]})
        client = SchemaRegistryClient({"url": url})
        ser = AvroSerializer(client, schema)
        producer = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(20):
            ctx = SerializationContext("clicks", MessageField.VALUE)
            producer.produce("clicks", ser({"page": f"/p{i}", "n": i}, ctx))
        assert producer.flush(30) == 0
        assert _subjects(url) == ["clicks-value"]

        de = AvroDeserializer(client)
        consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "g",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["clicks"])
        seen: list[dict] = []
        deadline = time.monotonic() + 60
        while len(seen) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(de(msg.value(), SerializationContext("clicks", MessageField.VALUE)))
        consumer.close()
        assert [r["n"] for r in seen] == list(range(20))

        # SIGTERM: the node stops its registry first, then itself; nothing is left running
        pids = _registry_pids(node)
        assert len(pids) == 1
        assert node.stop() == 0
        _wait(lambda: not _alive(pids[0]), "the registry to end with its node", 30)
        assert _subjects(url) is None
    finally:
        if node.alive():
            node.kill9()


@pytest.mark.timeout(240)
def test_a_dead_registry_is_restarted_and_a_killed_node_takes_it_along(tmp_path: Path) -> None:
    node, url = _start(tmp_path, "n")
    try:
        body = json.dumps({"schema": json.dumps({"type": "string"})}).encode()
        req = urllib.request.Request(f"{url}/subjects/s-value/versions", data=body, method="POST",
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert json.loads(resp.read()) == {"id": 1}
        first = _registry_pids(node)[0]
        os.kill(first, signal.SIGKILL)
        second = _wait(lambda: [p for p in _registry_pids(node) if p != first],
                       "the node to restart its registry")[0]
        # the restarted registry reads _schemas back: the subject is still there
        _wait(lambda: _subjects(url) == ["s-value"], "the restarted registry to serve s-value")
        assert "the Schema Registry (pid" in node.log() and "restarting" in node.log()

        node.kill9()
        _wait(lambda: not _alive(second), "the registry to die with a kill -9 of its node", 30)
    finally:
        if node.alive():
            node.kill9()


@pytest.mark.timeout(120)
def test_a_registry_port_in_use_refuses_the_start(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run(
            [*ODRADEK, "serve", "--data-dir", str(tmp_path / "d"),
             "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
             "--set", f"schema.registry.listeners=http://127.0.0.1:{port}",
             "--set", "console.listeners="],
            capture_output=True, text=True, timeout=60, env=ENV)
    assert result.returncode == 2, result.stderr
    assert "schema.registry.listeners" in result.stderr
    assert "in use" in result.stderr
    # and a bad listener is refused the same way, before anything starts
    result = subprocess.run(
        [*ODRADEK, "serve", "--data-dir", str(tmp_path / "e"),
         "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--set", "schema.registry.listeners=https://127.0.0.1:1", "--set", "console.listeners="],
        capture_output=True, text=True, timeout=60, env=ENV)
    assert result.returncode == 2
    assert "schema.registry.listeners" in result.stderr


@pytest.mark.timeout(120)
def test_a_controller_only_node_refuses_a_registry_asked_for(tmp_path: Path) -> None:
    port = free_port()
    controller = ["--set", "process.roles=controller", "--set", "node.id=1",
                  "--set", f"listeners=CONTROLLER://127.0.0.1:{port}",
                  "--set", "controller.listener.names=CONTROLLER",
                  "--set", f"controller.quorum.voters=1@127.0.0.1:{port}"]
    result = subprocess.run(
        [*ODRADEK, "serve", "--data-dir", str(tmp_path / "c"), *controller,
         "--set", f"schema.registry.listeners=http://127.0.0.1:{free_port()}",
         "--set", "console.listeners="],
        capture_output=True, text=True, timeout=60, env=ENV)
    assert result.returncode == 2, result.stderr
    assert "broker role" in result.stderr
