"""One node with its own Connect worker (`connect.listeners`: one SparkSession in that
child), its Schema Registry and a SASL_PLAINTEXT listener, and one PostgreSQL, shared by the
Connect modules (test_connect.py, test_connect_cdc.py, test_connect_mirror.py): a node,
a worker JVM and a Spark session each cost tens of seconds on a loaded machine.

Session-scoped, registered by tests/integration/conftest.py; `make test` hands those modules
to one xdist worker (tests/conftest.py's xdist_group_of), so they start once. Each test
deletes the connectors it made, so the next finds the worker empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.integration.connect_support import NodeWorker
from tests.support.broker import BrokerProcess, free_port
from tests.support.postgres import PostgresServer, running_postgres

SASL_USER, SASL_PASSWORD = "connect", "connect-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'username="{SASL_USER}" password="{SASL_PASSWORD}";')


@dataclass(frozen=True)
class ConnectPorts:
    worker: int
    sasl: int
    registry_url: str


@pytest.fixture(scope="session")
def connect_ports() -> ConnectPorts:
    return ConnectPorts(free_port(), free_port(), f"http://127.0.0.1:{free_port()}")


@pytest.fixture(scope="session")
def connect_node(tmp_path_factory: pytest.TempPathFactory,
                 connect_ports: ConnectPorts) -> Iterator[BrokerProcess]:
    """The node: PLAINTEXT and SASL_PLAINTEXT (PLAIN) listeners, its Schema Registry, and a
    Connect worker of its own on `connect.listeners`."""
    data = tmp_path_factory.mktemp("connect-node") / "data"
    port = free_port()
    node = BrokerProcess(data, port=port, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},"
                     f"SASL_PLAINTEXT://127.0.0.1:{connect_ports.sasl}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";',
        "connect.listeners": f"http://127.0.0.1:{connect_ports.worker}",
        "schema.registry.listeners": connect_ports.registry_url,
        "connect.spark.master": "local[1]"})
    node.start(timeout=120)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def connect(connect_node: BrokerProcess, connect_ports: ConnectPorts) -> NodeWorker:
    return NodeWorker(connect_node, connect_ports.worker).start()


@pytest.fixture(scope="session")
def connect_postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL for the Connect modules (each uses databases of its own names)."""
    with running_postgres() as server:
        yield server
