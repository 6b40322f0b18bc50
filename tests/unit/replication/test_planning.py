"""ImagePlanner: a metadata change is planned from the partitions it touched (issue 22), and
an image that shares nothing with the last one is planned in full."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from odradek.metadata.image import MetadataImage
from odradek.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from odradek.replication.planning import ImagePlanner, Plan

NODE = 1


@dataclass
class Hosted:
    topic: str
    index: int
    topic_id: uuid.UUID


def topic(name: str, partitions: int, replicas: tuple[int, ...] = (NODE,)) -> tuple[uuid.UUID,
                                                                                   list[Any]]:
    tid = uuid.uuid4()
    return tid, [TopicRecord(name, tid)] + [
        PartitionRecord(p, tid, list(replicas), list(replicas), [], [], replicas[0], 0, 0, 0)
        for p in range(partitions)]


def follow(planner: ImagePlanner, image: MetadataImage, hosted: dict[Any, Hosted],
           retry: tuple[tuple[str, int], ...] = ()) -> Plan:
    """Plan, then apply the plan to `hosted` as the replica manager would."""
    plan = planner.plan(image, hosted, retry)
    for part in plan.drop:
        del hosted[(part.topic, part.index)]
    for w in plan.create:
        hosted[(w.topic, w.partition)] = Hosted(w.topic, w.partition, w.topic_id)
    planner.followed(image)
    return plan


def keys(ws: list[Any]) -> list[tuple[str, int]]:
    return [(w.topic, w.partition) for w in ws]


def test_a_new_topic_plans_only_its_partitions() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    _, a = topic("a", 300)
    image = MetadataImage().apply(a)
    first = follow(planner, image, hosted)
    assert len(first.create) == 300 and first.reconfigure is None  # nothing followed yet
    _, b = topic("b", 2)
    image = image.apply(b)
    plan = follow(planner, image, hosted)
    assert keys(plan.create) == [("b", 0), ("b", 1)]
    assert plan.update == [] and plan.drop == [] and plan.reconfigure == set()
    assert len(hosted) == 302
    # nothing changed: nothing to do
    plan = follow(planner, image, hosted)
    assert (plan.create, plan.update, plan.drop) == ([], [], [])


def test_a_leader_change_updates_only_that_partition() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    tid, a = topic("a", 50, (NODE, 2))
    image = MetadataImage().apply(a)
    follow(planner, image, hosted)
    image = image.apply([PartitionChangeRecord(7, tid, leader=2)])
    plan = follow(planner, image, hosted)
    assert keys(plan.update) == [("a", 7)] and plan.create == [] and plan.drop == []
    assert plan.update[0].leader == 2 and plan.update[0].leader_epoch == 1
    # moved off this node: dropped, the others untouched
    image = image.apply([PartitionChangeRecord(8, tid, replicas=[2], isr=[2], leader=2)])
    plan = follow(planner, image, hosted)
    assert [(p.topic, p.index) for p in plan.drop] == [("a", 8)] and plan.update == []
    assert ("a", 8) not in hosted and len(hosted) == 49


def test_deleted_and_recreated_topics_drop_and_create() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    tid, a = topic("a", 3)
    _, b = topic("b", 3)
    image = MetadataImage().apply(a + b)
    follow(planner, image, hosted)
    image = image.apply([RemoveTopicRecord(tid)])
    plan = follow(planner, image, hosted)
    assert sorted((p.topic, p.index) for p in plan.drop) == [("a", 0), ("a", 1), ("a", 2)]
    assert plan.create == [] and plan.update == []
    # a topic of the same name under a new id, in one change with another deletion
    new_tid, again = topic("b", 2)
    old_b = image.topics_by_name["b"].topic_id
    image = image.apply([RemoveTopicRecord(old_b), *again])
    plan = follow(planner, image, hosted)
    assert sorted((p.topic, p.index) for p in plan.drop) == [("b", 0), ("b", 1), ("b", 2)]
    assert keys(plan.create) == [("b", 0), ("b", 1)]
    assert all(w.topic_id == new_tid for w in plan.create)
    assert sorted(hosted) == [("b", 0), ("b", 1)]


def test_config_changes_name_the_topics_to_reconfigure() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    _, a = topic("a", 2)
    _, b = topic("b", 2)
    image = MetadataImage().apply(a + b)
    follow(planner, image, hosted)
    image = image.apply([ConfigRecord(RESOURCE_TOPIC, "a", "retention.ms", "1000")])
    plan = follow(planner, image, hosted)
    assert plan.reconfigure == {"a"} and (plan.create, plan.update, plan.drop) == ([], [], [])
    # a broker default may change every topic's log config
    image = image.apply([ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "1000")])
    assert follow(planner, image, hosted).reconfigure is None


def test_an_image_built_anew_is_planned_in_full() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    _, a = topic("a", 4)
    image = MetadataImage().apply(a)
    follow(planner, image, hosted)
    # the same content in new objects (a snapshot loaded, say): every partition looked at
    t = image.topics_by_name["a"]
    rebuilt = MetadataImage(topics_by_name={"a": type(t)(t.name, t.topic_id, dict(t.partitions))},
                            topics_by_id={t.topic_id: t})
    assert planner.plan(rebuilt, hosted).update == []  # same partition objects: untouched
    fresh = MetadataImage().apply([TopicRecord("a", t.topic_id)] + [
        PartitionRecord(p, t.topic_id, [NODE], [NODE], [], [], NODE, 0, 0, 0) for p in range(4)])
    assert len(planner.plan(fresh, hosted).update) == 4
    # forget(): everything, hosted partitions the image no longer has included
    hosted[("gone", 0)] = Hosted("gone", 0, uuid.uuid4())
    planner.forget()
    plan = planner.plan(image, hosted)
    assert len(plan.update) == 4 and [(p.topic, p.index) for p in plan.drop] == [("gone", 0)]


def test_retried_partitions_are_planned_whatever_changed() -> None:
    planner = ImagePlanner(NODE)
    hosted: dict[Any, Hosted] = {}
    _, a = topic("a", 3)
    image = MetadataImage().apply(a)
    plan = planner.plan(image, hosted)
    # ("a", 1)'s log directory was offline: not hosted, and nothing changes in the image
    for w in plan.create:
        if w.partition != 1:
            hosted[(w.topic, w.partition)] = Hosted(w.topic, w.partition, w.topic_id)
    planner.followed(image)
    assert planner.plan(image, hosted).create == []
    assert keys(planner.plan(image, hosted, [("a", 1)]).create) == [("a", 1)]
