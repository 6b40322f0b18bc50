"""Share-group membership follows the leadership of the group's `__consumer_offsets`
partition after start (issue 20): a resignation drops the share groups of that partition
(and only those), and becoming its leader again replays their records, members and epochs
back, over a real runtime and real logs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.coordinator import offsets_topic as ot
from odradek.coordinator.share.coordinator import ShareCoordinator
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.protocol.errors import ErrorCode
from tests.unit.coordinator.support import OFFSETS_PARTITIONS, Node

E = ErrorCode


def _groups_on_two_partitions() -> tuple[str, str]:
    by_partition: dict[int, str] = {}
    for i in range(100):
        by_partition.setdefault(ot.partition_for(f"sg-{i}", OFFSETS_PARTITIONS), f"sg-{i}")
    first, second = list(by_partition.values())[:2]
    return first, second


def test_membership_reloads_when_the_offsets_partition_comes_back(tmp_path: Path) -> None:
    node = Node(tmp_path, topics={"data": 2})
    moved, stays = _groups_on_two_partitions()

    async def scenario() -> None:
        runtime = node.coordinator.runtime
        share = ShareCoordinator(runtime, BrokerConfig.from_properties({}), node.lookup,
                                 node.name_of, lambda g: {},
                                 offsets_partitions=OFFSETS_PARTITIONS)
        share.follow_membership()
        epochs = {}
        for gid in (moved, stays):
            a = share.heartbeat(gid, "m1", 0, ["data"], None, "client", "/10.0.0.1")
            assert a.error == E.none, a
            epochs[gid] = a.member_epoch
        p = ot.partition_for(moved, OFFSETS_PARTITIONS)
        assert await runtime.on_resign(ot.TOPIC, p, 5)
        assert moved not in share.groups and stays in share.groups
        assert await runtime.on_become_leader(ot.TOPIC, p, 6)
        for _ in range(500):  # the reload replays in a thread, then installs the groups
            if moved in share.groups:
                break
            await asyncio.sleep(0.01)
        else:
            pytest.fail("the share group was not reloaded")
        member = share.groups[moved].members["m1"]
        assert (member.member_epoch, member.subscribed) == (epochs[moved], ("data",))
        assert share.groups[stays].members["m1"].member_epoch == epochs[stays]
        await runtime.stop()

    try:
        asyncio.run(scenario())
    finally:
        node.close()
