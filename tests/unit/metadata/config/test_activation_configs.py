"""Kafka 4.1+'s activation record: the controller writes the cluster-level
min.insync.replicas once, so a topic's describe shows it as DYNAMIC_DEFAULT_BROKER_CONFIG (what
confluent-kafka-python's own test of IncrementalAlterConfigs expects of a 4.1+ broker)."""

from __future__ import annotations

from pathlib import Path

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.config_def import ConfigSource
from odradek.metadata.config.describe import describe_topic_configs
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import AlterOp, IncrementalAlterConfigsResource
from odradek.metadata.quorum import MetadataQuorum
from odradek.metadata.records import RESOURCE_BROKER


def open_controller(path: Path, props: dict[str, str]) -> Controller:
    quorum = MetadataQuorum.open(path, node_id=1)
    c = Controller(quorum, load_image(quorum, "cid"), BrokerConfig.from_properties(props))
    c.bootstrap()
    return c


def test_min_insync_replicas_is_written_once_at_activation(tmp_path: Path) -> None:
    c = open_controller(tmp_path, {"min.insync.replicas": "2"})
    try:
        assert c.image.broker_configs("") == {"min.insync.replicas": "2"}
        [entry] = describe_topic_configs({}, c.broker_config, include_synonyms=True,
                                         names=["min.insync.replicas"])
        assert (entry.value, entry.source) == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert [s.source for s in entry.synonyms][:2] == [
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG]
        c.incremental_alter_configs([IncrementalAlterConfigsResource(
            RESOURCE_BROKER, "", [("min.insync.replicas", AlterOp.SET, "1")])])
    finally:
        c.quorum.close()
    # a later activation keeps what is there (Kafka writes it only when absent)
    again = open_controller(tmp_path, {"min.insync.replicas": "3"})
    try:
        assert again.image.broker_configs("") == {"min.insync.replicas": "1"}
    finally:
        again.quorum.close()
