"""Configs on GROUP resources (type 32) through a real client's admin calls: the setup
confluent-kafka-python's own integration tests run (share.auto.offset.reset on a share
group, consumer.session.timeout.ms on a consumer group), refusals, and the value surviving a
restart (ConfigRecords of the metadata log)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    n = BrokerProcess(tmp_path_factory.mktemp("group-configs") / "data")
    n.start()
    try:
        yield n
    finally:
        n.stop()


def alter(admin: AdminClient, group: str, *entries: tuple[str, str | None, AlterConfigOpType]
          ) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op) for name, value, op in entries])
    for future in admin.incremental_alter_configs([res]).values():
        future.result(timeout=30)


def describe(admin: AdminClient, group: str) -> dict[str, ConfigEntry]:
    [future] = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    return dict(future.result(timeout=30))


def test_confluent_kafka_python_fixture_setup(node: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    SET = AlterConfigOpType.SET
    # cluster_fixture.py's share consumer setup, and test_incremental_alter_configs' group part
    alter(admin, "share-group-1", ("share.auto.offset.reset", "earliest", SET))
    alter(admin, "test-group", ("consumer.session.timeout.ms", "50000", SET))
    entries = describe(admin, "test-group")
    assert sorted(str(e) for e in entries.values() if not e.is_default) == [
        'consumer.session.timeout.ms="50000"']
    assert entries["consumer.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert entries["consumer.heartbeat.interval.ms"].value == "5000"
    assert entries["consumer.heartbeat.interval.ms"].is_default
    share = describe(admin, "share-group-1")
    assert share["share.auto.offset.reset"].value == "earliest"
    assert not share["share.auto.offset.reset"].is_default
    alter(admin, "test-group", ("consumer.session.timeout.ms", None, AlterConfigOpType.DELETE))
    assert describe(admin, "test-group")["consumer.session.timeout.ms"].value == "45000"


@pytest.mark.parametrize(("name", "value"), [
    ("consumer.session.timeout.ms", "90000"),  # above group.consumer.max.session.timeout.ms
    ("share.auto.offset.reset", "sometimes"),
    ("no.such.config", "1"),
])
def test_refused_with_invalid_config(node: BrokerProcess, name: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    with pytest.raises(KafkaException) as info:
        alter(admin, "refused", (name, value, AlterConfigOpType.SET))
    assert info.value.args[0].code() == KafkaError.INVALID_CONFIG
    assert describe(admin, "refused")[
        "consumer.session.timeout.ms"].value == "45000"


def test_survives_a_restart(tmp_path_factory: pytest.TempPathFactory) -> None:
    n = BrokerProcess(tmp_path_factory.mktemp("group-configs-restart") / "data")
    n.start()
    try:
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        alter(admin, "kept", ("share.record.lock.duration.ms", "20000", AlterConfigOpType.SET))
        n.stop()
        n.start()
        admin = AdminClient({"bootstrap.servers": n.bootstrap})
        assert describe(admin, "kept")["share.record.lock.duration.ms"].value == "20000"
    finally:
        n.stop()
