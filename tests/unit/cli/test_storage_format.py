"""Issue 14.1: `odradek storage random-uuid` and `odradek storage format` (kafka-storage.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from odradek.cli.main import app
from odradek.metadata.bootstrap import (
    BOOTSTRAP_CHECKPOINT,
    FormatError,
    format_data_dir,
    read_bootstrap_checkpoint,
)
from odradek.metadata.meta_properties import read_meta_properties, uuid_from_base64
from odradek.metadata.records import FeatureLevelRecord

runner = CliRunner()


def new_id() -> str:
    result = runner.invoke(app, ["storage", "random-uuid"])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def test_random_uuid_is_a_kafka_uuid() -> None:
    ids = {new_id() for _ in range(5)}
    assert len(ids) == 5
    for value in ids:
        assert len(value) == 22 and not value.startswith("-")
        uuid_from_base64(value)


def test_format_writes_meta_properties_and_bootstrap(tmp_path: Path) -> None:
    cluster = new_id()
    data = tmp_path / "n2"
    result = runner.invoke(app, ["storage", "format", "--cluster-id", cluster,
                                 "--data-dir", str(data), "--set", "node.id=2"])
    assert result.exit_code == 0, result.output
    assert "Formatting" in result.output
    meta = read_meta_properties(data)
    assert meta is not None
    assert (meta.cluster_id, meta.node_id, meta.version) == (cluster, 2, 1)
    assert meta.directory_id
    records = read_bootstrap_checkpoint(data)
    assert FeatureLevelRecord("metadata.version", 21) in records
    assert FeatureLevelRecord("transaction.version", 2) in records


def test_format_reads_node_id_from_the_config_file(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("node.id=5\nprocess.roles=broker,controller\n"
                     "controller.quorum.voters=5@127.0.0.1:9093\n"
                     "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n")
    result = runner.invoke(app, ["storage", "format", "-t", new_id(), "--data-dir",
                                 str(tmp_path / "d"), "--config", str(props)])
    assert result.exit_code == 0, result.output
    assert read_meta_properties(tmp_path / "d").node_id == 5


def test_format_refuses_another_cluster_and_a_formatted_directory(tmp_path: Path) -> None:
    cluster = new_id()
    format_data_dir(tmp_path, cluster, 1)
    before = (tmp_path / "meta.properties").read_bytes()
    other = runner.invoke(app, ["storage", "format", "--cluster-id", new_id(),
                                "--data-dir", str(tmp_path), "--set", "node.id=1"])
    assert other.exit_code == 1
    assert "belongs to cluster" in other.output
    again = runner.invoke(app, ["storage", "format", "--cluster-id", cluster,
                                "--data-dir", str(tmp_path), "--set", "node.id=1"])
    assert again.exit_code == 1 and "already formatted" in again.output
    ignored = runner.invoke(app, ["storage", "format", "--cluster-id", cluster,
                                  "--data-dir", str(tmp_path), "--set", "node.id=1",
                                  "--ignore-formatted"])
    assert ignored.exit_code == 0, ignored.output
    assert (tmp_path / "meta.properties").read_bytes() == before
    with pytest.raises(FormatError, match=r"node\.id 1, not 2"):
        format_data_dir(tmp_path, cluster, 2, ignore_formatted=True)


def test_format_refuses_bad_ids_configs_and_foreign_directories(tmp_path: Path) -> None:
    bad = runner.invoke(app, ["storage", "format", "--cluster-id", "not-a-uuid",
                              "--data-dir", str(tmp_path / "a")])
    assert bad.exit_code == 1 and "does not appear to be a valid UUID" in bad.output
    assert not (tmp_path / "a").exists()
    config = runner.invoke(app, ["storage", "format", "--cluster-id", new_id(), "--data-dir",
                                 str(tmp_path / "b"), "--set", "process.roles=controller"])
    assert config.exit_code == 2 and "needs a quorum" in config.output
    used = tmp_path / "c"
    (used / "clicks-0").mkdir(parents=True)
    foreign = runner.invoke(app, ["storage", "format", "--cluster-id", new_id(),
                                  "--data-dir", str(used)])
    assert foreign.exit_code == 1 and "no meta.properties" in foreign.output
    assert not (used / BOOTSTRAP_CHECKPOINT).exists()


def test_damaged_bootstrap_checkpoint_is_refused(tmp_path: Path) -> None:
    format_data_dir(tmp_path, new_id(), 1)
    path = tmp_path / BOOTSTRAP_CHECKPOINT
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="damaged"):
        read_bootstrap_checkpoint(tmp_path)
