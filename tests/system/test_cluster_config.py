"""Issue 14.1: a node with a quorum starts only from a formatted directory, and every KRaft
config mistake is one `Error:` line, exit 2, with nothing written; a single node without a
quorum still formats itself (meta.properties and bootstrap.checkpoint) at its first start."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from odradek.metadata.bootstrap import BOOTSTRAP_CHECKPOINT, read_bootstrap_checkpoint
from odradek.metadata.meta_properties import read_meta_properties
from tests.support.broker import ODRADEK, BrokerProcess, free_port

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def serve(data: Path, *settings: str) -> subprocess.CompletedProcess[str]:
    # no admin HTTP or registry unless a test asks (their default ports would be shared by
    # parallel tests)
    cmd = [*ODRADEK, "serve", "--data-dir", str(data), "--set", "admin.listeners=",
           "--set", "schema.registry.listeners=",
           "--set", "console.listeners="]
    for s in settings:
        cmd += ["--set", s]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=ENV)


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr, result.stdout)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


def quorum(node_id: int, port: int, cport: int, voters: str, roles: str = "broker,controller",
           ) -> list[str]:
    listeners = {"broker,controller": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                 "controller": f"CONTROLLER://127.0.0.1:{cport}",
                 "broker": f"PLAINTEXT://127.0.0.1:{port}"}[roles]
    return [f"node.id={node_id}", f"process.roles={roles}", f"controller.quorum.voters={voters}",
            f"listeners={listeners}"]


@pytest.mark.timeout(120)
def test_unformatted_directory_is_refused_with_a_quorum(tmp_path: Path) -> None:
    port, cport = free_port(), free_port()
    data = tmp_path / "n1"
    line = one_error_line(serve(data, *quorum(1, port, cport, f"1@127.0.0.1:{cport}")))
    assert "not formatted" in line and "odradek storage format" in line
    assert not data.exists()


CASES = {
    "controller_not_a_voter": (lambda p, c: quorum(4, p, c, f"1@127.0.0.1:{c}"),
                               ["node.id 4", "controller.quorum.voters"]),
    "controller_without_voters": (lambda p, c: [f"listeners=CONTROLLER://127.0.0.1:{c}",
                                                "process.roles=controller"],
                                  ["needs a quorum"]),
    "controller_listener_not_listed": (
        lambda p, c: [*quorum(1, p, c, f"1@127.0.0.1:{c}")[:3],
                      f"listeners=PLAINTEXT://127.0.0.1:{p}"],
        ["controller.listener.names", "listeners"]),
    "broker_listening_as_controller": (
        lambda p, c: [*quorum(2, p, c, f"1@127.0.0.1:{c}")[:3],
                      f"listeners=PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}",
                      "process.roles=broker"],
        ["must not contain"]),
    "bad_voters": (lambda p, c: quorum(1, p, c, "1@127.0.0.1"), ["controller.quorum.voters"]),
    "missing_node_id": (lambda p, c: quorum(1, p, c, f"1@127.0.0.1:{c}")[1:], ["node.id"]),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(CASES))
def test_kraft_config_refusals_write_nothing(tmp_path: Path, case: str) -> None:
    settings, words = CASES[case]
    data = tmp_path / "data"
    line = one_error_line(serve(data, *settings(free_port(), free_port())))
    for word in words:
        assert word in line, (word, line)
    assert not data.exists()


@pytest.mark.timeout(120)
def test_single_node_formats_itself(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "single").start()
    try:
        meta = read_meta_properties(node.data_dir)
        assert meta is not None and meta.node_id == 1
        assert (node.data_dir / BOOTSTRAP_CHECKPOINT).exists()
        assert read_bootstrap_checkpoint(node.data_dir)
    finally:
        assert node.stop() == 0
    # and it starts again from what it wrote
    node.start()
    assert node.stop() == 0
