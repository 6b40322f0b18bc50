"""Issue 19: `connect.listeners` on `odradek serve`, without starting a node: off by default,
a port in use or a bad listener refused before the node starts, the worker's properties file
checked at start, the child's command line (the process-level run is in
tests/integration/test_connect.py)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from odradek.broker.startup import StartRefused
from odradek.cli.connect_service import connect_service, serve_services
from odradek.metadata.config.broker_configs import BrokerConfig

OFF = {"schema.registry.listeners": "", "console.listeners": ""}


def test_off_by_default() -> None:
    assert connect_service(BrokerConfig(OFF), None) is None
    assert serve_services(BrokerConfig(OFF), None) == []


def test_refusals_name_the_setting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(StartRefused, match=r"connect\.listeners.*in use"):
            connect_service(BrokerConfig({"connect.listeners": f"http://127.0.0.1:{port}"}),
                            None)
    with pytest.raises(StartRefused, match=r"connect\.listeners"):
        connect_service(BrokerConfig({"connect.listeners": "https://127.0.0.1:1"}), None)
    props = tmp_path / "worker.properties"
    props.write_text("value.converter=com.example.NoSuchConverter\n")
    with pytest.raises(StartRefused, match=r"connect\.config\.file .*NoSuchConverter"):
        connect_service(BrokerConfig({"connect.listeners": "http://127.0.0.1:0",
                                      "connect.config.file": str(props)}), None)
    with pytest.raises(StartRefused, match="No such file"):
        connect_service(BrokerConfig({"connect.listeners": "http://127.0.0.1:0",
                                      "connect.config.file": str(tmp_path / "none")}), None)
    with pytest.raises(StartRefused, match="broker role"):
        connect_service(BrokerConfig({"connect.listeners": "http://127.0.0.1:0",
                                      "process.roles": "controller"}), None)


def test_the_childs_command(tmp_path: Path) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("group.id=g\n")
    service = connect_service(BrokerConfig({
        "connect.listeners": "http://127.0.0.1:0", "connect.config.file": str(props),
        "connect.spark.master": "local[1]"}), None)
    assert service is not None
    try:
        service._bootstrap = "127.0.0.1:9092"
        cmd = service._command([7])
        assert cmd[cmd.index("connect") + 1] == "serve"
        assert cmd[cmd.index("--master") + 1] == "local[1]"
        assert cmd[cmd.index("--config") + 1] == str(props)
        assert cmd[cmd.index("--inherit-fds") + 1] == "7"
    finally:
        service.stop()
