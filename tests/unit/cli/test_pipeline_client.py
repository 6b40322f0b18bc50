"""`odradek pipeline run -X ... --command-config FILE`: the client settings every source and
flow gets (Kafka's names; -X wins over the file; the cluster comes from -b only)."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from odradek.cli.pipeline import _client


def test_x_pairs_win_over_the_file(tmp_path: Path) -> None:
    props = tmp_path / "c.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                     'required username="a" password="b";\n')
    got = _client(["sasl.mechanism=SCRAM-SHA-512"], props)
    assert got["security.protocol"] == "SASL_SSL" and got["sasl.mechanism"] == "SCRAM-SHA-512"
    assert got["sasl.jaas.config"].endswith('password="b";')


def test_refusals(tmp_path: Path) -> None:
    with pytest.raises(typer.BadParameter, match="-b/--bootstrap-server"):
        _client(["bootstrap.servers=elsewhere:9092"], None)
    with pytest.raises(typer.BadParameter, match="key=value"):
        _client(["security.protocol"], None)
    with pytest.raises(typer.BadParameter, match="command-config"):
        _client([], tmp_path / "missing.properties")
