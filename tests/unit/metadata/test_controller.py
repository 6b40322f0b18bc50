from __future__ import annotations

import uuid

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.config_def import ConfigSource
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterOp,
    CreatableTopic,
    CreatePartitionsTopic,
    IncrementalAlterConfigsResource,
)
from odradek.metadata.quorum import MetadataQuorum
from odradek.metadata.records import RESOURCE_BROKER, RESOURCE_TOPIC
from odradek.protocol.errors import ErrorCode

E = ErrorCode


def open_controller(path, props=None) -> Controller:
    quorum = MetadataQuorum.open(path, node_id=1)
    controller = Controller(quorum, load_image(quorum, "cid"), BrokerConfig.from_properties(props or {}))
    controller.bootstrap()
    controller.register_broker()
    return controller


@pytest.fixture
def controller(tmp_path):
    c = open_controller(tmp_path, {"num.partitions": "3"})
    yield c
    c.quorum.close()


def create(controller, *topics, validate_only=False):
    return controller.create_topics(list(topics), validate_only=validate_only)


def test_create_topic_with_defaults_and_configs(controller):
    deltas = []
    controller.add_listener(deltas.append)
    [res] = create(controller, CreatableTopic("clicks", configs={"retention.ms": "1000"}))
    assert res.error_code == E.none
    assert (res.num_partitions, res.replication_factor) == (3, 1)
    retention = next(c for c in res.configs if c.name == "retention.ms")
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    topic = controller.image.topics_by_name["clicks"]
    assert topic.topic_id == res.topic_id
    assert controller.image.topics_by_id[res.topic_id] is topic
    for p in range(3):
        part = topic.partitions[p]
        assert (part.replicas, part.isr, part.leader, part.leader_epoch) == ((1,), (1,), 1, 0)
    assert controller.image.topic_configs("clicks") == {"retention.ms": "1000"}
    [delta] = deltas
    assert delta.created_topics == {"clicks": res.topic_id}
    assert delta.created_partitions == {("clicks", p) for p in range(3)}


def test_state_survives_restart(tmp_path):
    c = open_controller(tmp_path)
    [res] = create(c, CreatableTopic("t", 2))
    c.quorum.close()
    c = open_controller(tmp_path)
    topic = c.image.topics_by_name["t"]
    assert topic.topic_id == res.topic_id
    assert len(topic.partitions) == 2
    assert topic.partitions[0].leader == 1
    assert topic.partitions[0].leader_epoch == 0  # same leader after restart: same epoch
    assert c.image.features["metadata.version"] == 21
    assert c.image.live_brokers() == [1]
    c.quorum.close()


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("", E.invalid_topic_exception),
        (".", E.invalid_topic_exception),
        ("..", E.invalid_topic_exception),
        ("a" * 250, E.invalid_topic_exception),
        ("bad/name", E.invalid_topic_exception),
        ("spaces are bad", E.invalid_topic_exception),
    ],
)
def test_illegal_names(controller, name, code):
    [res] = create(controller, CreatableTopic(name))
    assert res.error_code == code
    assert res.error_message
    assert controller.image.topics_by_name == {}


def test_longest_legal_name(controller):
    [res] = create(controller, CreatableTopic("a" * 249))
    assert res.error_code == E.none


def test_exists_and_collisions(controller):
    create(controller, CreatableTopic("my.topic"))
    [again] = create(controller, CreatableTopic("my.topic"))
    assert again.error_code == E.topic_already_exists
    [collide] = create(controller, CreatableTopic("my_topic"))
    assert collide.error_code == E.invalid_topic_exception
    assert "my.topic" in collide.error_message
    dup = create(controller, CreatableTopic("x"), CreatableTopic("x"))
    assert [r.error_code for r in dup] == [E.invalid_request, E.invalid_request]
    assert "x" not in controller.image.topics_by_name


def test_partition_and_replication_factor_errors(controller):
    results = create(
        controller,
        CreatableTopic("p0", num_partitions=0),
        CreatableTopic("pneg", num_partitions=-5),
        CreatableTopic("rf0", replication_factor=0),
        CreatableTopic("rf3", replication_factor=3),
        CreatableTopic("ok", num_partitions=2, replication_factor=1),
    )
    assert [r.error_code for r in results] == [
        E.invalid_partitions,
        E.invalid_partitions,
        E.invalid_replication_factor,
        E.invalid_replication_factor,
        E.none,
    ]
    assert set(controller.image.topics_by_name) == {"ok"}
    assert results[0].topic_id == uuid.UUID(int=0)


def test_replica_assignments(controller):
    [ok] = create(controller, CreatableTopic("a", assignments={0: [1], 1: [1]}))
    assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (E.none, 2, 1)
    bad = create(
        controller,
        CreatableTopic("gap", assignments={0: [1], 2: [1]}),
        CreatableTopic("unknown", assignments={0: [2]}),
        CreatableTopic("twice", assignments={0: [1, 1]}),
        CreatableTopic("empty", assignments={0: []}),
        CreatableTopic("both", num_partitions=2, assignments={0: [1]}),
    )
    assert [r.error_code for r in bad] == [
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_replica_assignment,
        E.invalid_request,
    ]


def test_invalid_configs_create_nothing(controller):
    results = create(
        controller,
        CreatableTopic("a", configs={"segment.bytes": "1"}),
        CreatableTopic("b", configs={"not.a.config": "1"}),
        CreatableTopic("c", configs={"cleanup.policy": "compact"}),
    )
    assert [r.error_code for r in results] == [E.invalid_config, E.invalid_config, E.none]
    assert "segment.bytes" in results[0].error_message
    assert "not.a.config" in results[1].error_message
    assert set(controller.image.topics_by_name) == {"c"}


def test_validate_only_writes_nothing(controller):
    end = controller.quorum.end_offset
    [res] = create(controller, CreatableTopic("v", 4), validate_only=True)
    assert (res.error_code, res.num_partitions) == (E.none, 4)
    assert "v" not in controller.image.topics_by_name
    assert controller.quorum.end_offset == end


def test_delete_by_name_and_id(controller):
    [a] = create(controller, CreatableTopic("a"))
    create(controller, CreatableTopic("b"))
    deltas = []
    controller.add_listener(deltas.append)
    results = controller.delete_topics(names=["b", "nope"], ids=[a.topic_id, uuid.uuid4()])
    assert [r.error_code for r in results] == [
        E.none,
        E.unknown_topic_or_partition,
        E.none,
        E.unknown_topic_id,
    ]
    assert results[2].name == "a"
    assert controller.image.topics_by_name == {}
    assert set(deltas[0].deleted_topics) == {"a", "b"}
    # the name can be used again, with a new id
    [again] = create(controller, CreatableTopic("a"))
    assert again.error_code == E.none and again.topic_id != a.topic_id


def test_delete_disabled(tmp_path):
    c = open_controller(tmp_path, {"delete.topic.enable": "false"})
    create(c, CreatableTopic("a"))
    [res] = c.delete_topics(names=["a"])
    assert res.error_code == E.topic_deletion_disabled
    assert "a" in c.image.topics_by_name
    c.quorum.close()


def test_create_partitions(controller):
    create(controller, CreatableTopic("t", 2))
    results = controller.create_partitions(
        [
            CreatePartitionsTopic("t", 4),
            CreatePartitionsTopic("missing", 4),
        ]
    )
    assert [r.error_code for r in results] == [E.none, E.unknown_topic_or_partition]
    assert sorted(controller.image.topics_by_name["t"].partitions) == [0, 1, 2, 3]
    for count in (4, 3):
        [res] = controller.create_partitions([CreatePartitionsTopic("t", count)])
        assert res.error_code == E.invalid_partitions
    [wrong] = controller.create_partitions([CreatePartitionsTopic("t", 6, [[1]])])
    assert wrong.error_code == E.invalid_replica_assignment
    [bad] = controller.create_partitions([CreatePartitionsTopic("t", 5, [[9]])])
    assert bad.error_code == E.invalid_replica_assignment
    [vo] = controller.create_partitions([CreatePartitionsTopic("t", 5, [[1]])], validate_only=True)
    assert vo.error_code == E.none
    assert len(controller.image.topics_by_name["t"].partitions) == 4


def test_alter_configs_replaces_all_overrides(controller):
    create(controller, CreatableTopic("t", configs={"retention.ms": "1000", "segment.ms": "5000"}))
    [res] = controller.alter_configs(
        [AlterConfigsResource(RESOURCE_TOPIC, "t", {"retention.ms": "2000"})]
    )
    assert res.error_code == E.none
    assert controller.image.topic_configs("t") == {"retention.ms": "2000"}
    results = controller.alter_configs(
        [
            AlterConfigsResource(RESOURCE_TOPIC, "t", {"retention.ms": "3000", "segment.bytes": "1"}),
            AlterConfigsResource(RESOURCE_TOPIC, "missing", {}),
        ]
    )
    assert [r.error_code for r in results] == [E.invalid_config, E.unknown_topic_or_partition]
    assert controller.image.topic_configs("t") == {"retention.ms": "2000"}  # nothing half-applied


def test_alter_configs_refuses_a_key_given_twice(controller):
    create(controller, CreatableTopic("t", configs={"retention.ms": "1000"}))
    [res] = controller.alter_configs(
        [AlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", "2000"), ("retention.ms", "3000")])]
    )
    assert res.error_code == E.invalid_request
    assert controller.image.topic_configs("t") == {"retention.ms": "1000"}


def test_incremental_alter_configs(controller):
    create(controller, CreatableTopic("t"))
    deltas = []
    controller.add_listener(deltas.append)
    S, D, A, SUB = AlterOp.SET, AlterOp.DELETE, AlterOp.APPEND, AlterOp.SUBTRACT
    [res] = controller.incremental_alter_configs(
        [IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", S, "10"), ("cleanup.policy", A, "compact")])]
    )
    assert res.error_code == E.none
    assert controller.image.topic_configs("t") == {"retention.ms": "10", "cleanup.policy": "delete,compact"}
    assert deltas[-1].changed_configs == {(RESOURCE_TOPIC, "t")}
    controller.incremental_alter_configs(
        [IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", D, None), ("cleanup.policy", SUB, "delete")])]
    )
    assert controller.image.topic_configs("t") == {"cleanup.policy": "compact"}

    errors = controller.incremental_alter_configs(
        [
            IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("segment.ms", S, "100"), ("segment.bytes", S, "2")]),
            IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", A, "5")]),
            IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("nope", S, "5")]),
            IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", S, "1"), ("retention.ms", D, None)]),
            IncrementalAlterConfigsResource(RESOURCE_TOPIC, "gone", [("retention.ms", S, "1")]),
        ]
    )
    assert [r.error_code for r in errors] == [
        E.invalid_config,
        E.invalid_config,
        E.invalid_config,
        E.invalid_request,
        E.unknown_topic_or_partition,
    ]
    assert controller.image.topic_configs("t") == {"cleanup.policy": "compact"}
    [vo] = controller.incremental_alter_configs(
        [IncrementalAlterConfigsResource(RESOURCE_TOPIC, "t", [("retention.ms", S, "7")])], validate_only=True
    )
    assert vo.error_code == E.none
    assert controller.image.topic_configs("t") == {"cleanup.policy": "compact"}


def test_dynamic_broker_configs(controller):
    S = AlterOp.SET
    [res] = controller.incremental_alter_configs(
        [IncrementalAlterConfigsResource(RESOURCE_BROKER, "", [("log.retention.ms", S, "5000")])]
    )
    assert res.error_code == E.none
    assert controller.broker_config.get_int("log.retention.ms") == 5000
    [per_broker] = controller.incremental_alter_configs(
        [IncrementalAlterConfigsResource(RESOURCE_BROKER, "1", [("log.retention.ms", S, "6000")])]
    )
    assert per_broker.error_code == E.none
    assert controller.broker_config.topic_default("retention.ms")[0] == 6000
    errors = controller.incremental_alter_configs(
        [
            IncrementalAlterConfigsResource(RESOURCE_BROKER, "1", [("node.id", S, "2")]),
            IncrementalAlterConfigsResource(RESOURCE_BROKER, "1", [("log.retention.ms", S, "x")]),
            IncrementalAlterConfigsResource(RESOURCE_BROKER, "one", [("log.retention.ms", S, "1")]),
        ]
    )
    assert [r.error_code for r in errors] == [E.invalid_request, E.invalid_config, E.invalid_request]
    assert controller.broker_config.get_int("node.id") == 1
