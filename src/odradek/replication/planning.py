"""What a metadata change asks of this node's partitions, found in proportion to what it touched.

An image shares every topic and partition a change did not touch with the image before it
(MetadataDelta copies on write), so comparing the two by identity finds what changed without
looking at the other partitions: applying a delta costs the partitions it touches, as in
Kafka's ReplicaManager.applyDelta, not every partition the node hosts (issue 22: creating a
topic on a node with 20,000 partitions replanned all 20,000). An image built anew (a
snapshot, a test) shares nothing, so every partition counts as touched: slower, never wrong.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.metadata.records import RESOURCE_TOPIC

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Wanted:
    """A partition this node is a replica of, as the image has it."""
    topic: str
    partition: int
    topic_id: uuid.UUID
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    partition_epoch: int = 0


def iter_image_partitions(image: Any) -> Iterator[tuple[Any, Any]]:
    """(topic image, partition image) for every partition in the image."""
    for topic in image.topics_by_name.values():
        for p in partitions_of(topic).values():
            yield topic, p


def partitions_of(topic: Any) -> Mapping[int, Any]:
    parts = topic.partitions
    return parts if isinstance(parts, Mapping) else {p.partition: p for p in parts}


def wanted_of(node_id: int, topic: Any, p: Any) -> Wanted | None:
    if node_id not in p.replicas:
        return None
    return Wanted(topic.name, p.partition, topic.topic_id, p.leader, p.leader_epoch,
                  list(p.replicas), list(p.isr), getattr(p, "partition_epoch", 0))


@dataclass(slots=True)
class Plan:
    create: list[Wanted] = field(default_factory=list)
    drop: list[Any] = field(default_factory=list)  # Partitions
    update: list[Wanted] = field(default_factory=list)
    # hosted topics whose log config may have changed (None: every hosted topic's)
    reconfigure: set[str] | None = field(default_factory=set)


class ImagePlanner:
    """Plans against the image the last applied plan followed (`followed`)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        self._topics: Mapping[str, Any] | None = None  # topics_by_name last followed
        self._configs: Mapping[Any, Any] | None = None  # configs last followed

    def forget(self) -> None:
        """The next plan looks at every partition (the hosted set changed outside a plan)."""
        self._topics = self._configs = None

    def followed(self, image: Any) -> None:
        """The plan of `image` was applied: the next one compares against it."""
        self._topics = image.topics_by_name
        self._configs = getattr(image, "configs", None)

    def plan(self, image: Any, hosted: Mapping[Key, Any], retry: Iterable[Key] = ()) -> Plan:
        """Creates, drops and updates that make `hosted` follow `image`; `retry`: partitions
        to look at again whatever changed (those a failed log directory kept from opening)."""
        topics = image.topics_by_name
        before = self._topics
        keys: set[Key] = set(retry)
        if before is None:
            keys.update(hosted)
            for topic, p in iter_image_partitions(image):
                keys.add((topic.name, p.partition))
        elif before is not topics:
            for name, topic in topics.items():
                old = before.get(name)
                if old is not topic:
                    keys.update(_touched(name, old, topic))
            for name, old in before.items():
                if name not in topics:
                    keys.update((name, i) for i in partitions_of(old))
        plan = Plan(reconfigure=self._reconfigured(image))
        for key in keys:
            topic = topics.get(key[0])
            p = None if topic is None else partitions_of(topic).get(key[1])
            w = None if p is None else wanted_of(self.node_id, topic, p)
            part = hosted.get(key)
            if part is not None and (w is None or w.topic_id != part.topic_id):
                plan.drop.append(part)
            if w is None:
                continue
            if part is None or part.topic_id != w.topic_id:
                plan.create.append(w)
            else:
                plan.update.append(w)
        # in partition order, as the full plans were: the logs open (and fetchers start) in
        # an order one can follow in the node's log
        plan.create.sort(key=lambda w: (w.topic, w.partition))
        plan.update.sort(key=lambda w: (w.topic, w.partition))
        return plan

    def _reconfigured(self, image: Any) -> set[str] | None:
        configs = getattr(image, "configs", None)
        before = self._configs
        if before is None or configs is None or self._topics is None:
            return None
        if configs is before:
            return set()
        out: set[str] = set()
        for key in set(configs) | set(before):
            if configs.get(key) is before.get(key) or configs.get(key) == before.get(key):
                continue
            if key[0] != RESOURCE_TOPIC:
                return None  # a broker default: every topic's log config may follow it
            out.add(key[1])
        return out


def _touched(name: str, old: Any, topic: Any) -> Iterator[Key]:
    """The partitions of one topic a change touched (all of them when it is new or
    recreated under another id)."""
    parts = partitions_of(topic)
    if old is None or old.topic_id != topic.topic_id:
        yield from ((name, i) for i in parts)
        if old is not None:
            yield from ((name, i) for i in partitions_of(old))
        return
    old_parts = partitions_of(old)
    if parts is old_parts:
        return
    for i, p in parts.items():
        if old_parts.get(i) is not p:
            yield (name, i)
    for i in old_parts:
        if i not in parts:
            yield (name, i)
