"""Issue 17: `odradek registry subject|schema|compatibility` against a real registry process:
tables, `--format json`, the registry's errors as one line with the code, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_registry_api import (
    USER_BAD,
    USER_V1,
    USER_V2,
    RegistryProcess,
    running_registry,
)
from tests.support.broker import BrokerProcess


@pytest.fixture
def registry(broker: BrokerProcess, tmp_path: Path) -> Iterator[RegistryProcess]:
    with running_registry(broker.bootstrap, tmp_path) as reg:
        yield reg


def cli(registry: RegistryProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", "registry", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ODRADEK_REGISTRY_URL": registry.url})


def test_registry_cli(registry: RegistryProcess, tmp_path: Path) -> None:
    v1 = tmp_path / "user.avsc"
    v1.write_text(USER_V1)
    out = cli(registry, "schema", "register", "users-value", "-f", str(v1))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0].split() == ["SUBJECT", "VERSION", "ID"]
    assert out.stdout.split("\n")[1].split() == ["users-value", "1", "1"]
    out = cli(registry, "schema", "register", "users-value", "--schema", USER_V2,
              "--format", "json")
    assert json.loads(out.stdout) == [{"subject": "users-value", "version": 2, "id": 2}]
    proto = tmp_path / "order.proto"
    proto.write_text('syntax = "proto3"; package shop; message Order { string id = 1; }')
    out = cli(registry, "schema", "register", "orders-value", "-f", str(proto))
    assert out.returncode == 0, out.stderr

    out = cli(registry, "subject", "list")
    assert [line.split() for line in out.stdout.strip().split("\n")] == [
        ["SUBJECT", "TYPE", "LATEST-VERSION", "LATEST-ID"],
        ["orders-value", "PROTOBUF", "1", "3"], ["users-value", "AVRO", "2", "2"]]
    out = cli(registry, "subject", "versions", "users-value", "--format", "json")
    assert json.loads(out.stdout) == [
        {"version": 1, "id": 1, "type": "AVRO", "references": 0},
        {"version": 2, "id": 2, "type": "AVRO", "references": 0}]
    out = cli(registry, "subject", "get", "users-value", "--version", "1")
    assert out.stdout.split("\n")[1].split() == ["users-value", "1", "1", "AVRO", "-"]
    assert json.loads(out.stdout.split("\n", 3)[3]) == json.loads(USER_V1)
    out = cli(registry, "schema", "get", "2", "--format", "json")
    assert json.loads(out.stdout)["versions"] == [{"subject": "users-value", "version": 2}]

    # Compatibility: a field without a default is refused under BACKWARD (exit 1, reasons).
    out = cli(registry, "compatibility", "check", "users-value", "--schema", USER_BAD)
    assert out.returncode == 1
    assert out.stdout.split("\n")[1].split() == ["users-value", "BACKWARD", "no"]
    assert "email" in out.stdout
    out = cli(registry, "compatibility", "set", "none", "--subject", "users-value")
    assert out.returncode == 0 and "NONE" in out.stdout
    out = cli(registry, "compatibility", "check", "users-value", "--schema", USER_BAD,
              "--format", "json")
    assert out.returncode == 0
    assert json.loads(out.stdout) == {"subject": "users-value", "level": "NONE",
                                      "compatible": True, "messages": []}
    out = cli(registry, "compatibility", "get", "--format", "json")
    assert json.loads(out.stdout) == [{"subject": "(global)", "level": "BACKWARD"}]

    # Errors: the registry's message and code on one line; bad usage is exit 2.
    out = cli(registry, "subject", "get", "nope")
    assert (out.returncode, out.stderr.strip()) == (1, "Error: Subject 'nope' not found. (40401)")
    out = cli(registry, "compatibility", "set", "SIDEWAYS")
    assert out.returncode == 2 and "LEVEL must be one of" in out.stderr
    out = cli(registry, "schema", "register", "x", "--schema", "{not avro")
    assert out.returncode == 1 and "(42201)" in out.stderr
    out = cli(registry, "schema", "register", "x")
    assert out.returncode == 2 and "exactly one of" in out.stderr

    # Deletes: soft, then permanent.
    out = cli(registry, "subject", "delete", "users-value", "--version", "1")
    assert out.stdout.split("\n")[1].split() == ["users-value", "1", "soft"]
    out = cli(registry, "subject", "delete", "users-value", "--version", "1", "--permanent",
              "--format", "json")
    assert json.loads(out.stdout) == [{"subject": "users-value", "version": 1,
                                       "deleted": "permanently"}]
    out = cli(registry, "subject", "delete", "users-value")
    assert out.stdout.split("\n")[1].split() == ["users-value", "2", "soft"]
    out = cli(registry, "subject", "list", "--format", "json")
    assert [r["subject"] for r in json.loads(out.stdout)] == ["orders-value"]


def test_unreachable_registry_is_one_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "odradek.cli.main", "registry", "subject", "list",
                          "--registry-url", "http://127.0.0.1:1"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1
    assert out.stderr.startswith("Error: cannot reach the registry at http://127.0.0.1:1")
    assert len(out.stderr.strip().split("\n")) == 1
