"""ReplicaManager in a cluster, without sockets: roles from the image, acks=all through the
produce purgatory, follower fetches moving the ISR and HW, consumers on followers and the
preferred read replica (KIP-392), AlterPartition through the injected callable."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.metadata.image import BrokerRegistration, MetadataImage, PartitionImage, TopicImage
from odradek.protocol.errors import ErrorCode
from odradek.replication.config import (
    RACK_AWARE_SELECTOR,
    AlterPartitionItem,
    AlterPartitionResult,
    ReplicationConfig,
)
from odradek.replication.fetch_params import FetchParams
from odradek.replication.manager import ReplicaManager
from odradek.storage.config import LogConfig
from odradek.storage.log_manager import LogManager

from .support import TID, batch


def image(parts: dict[int, tuple[int, int, tuple[int, ...], tuple[int, ...], int]],
          racks: dict[int, str] | None = None) -> MetadataImage:
    """parts: partition -> (leader, leader epoch, replicas, isr, partition epoch)."""
    topic = TopicImage("t", TID, {p: PartitionImage(p, r, i, lead, ep, pe)
                                  for p, (lead, ep, r, i, pe) in parts.items()})
    brokers = {b: BrokerRegistration(b, uuid.uuid4(), 1, (), rack, False)
               for b, rack in (racks or {}).items()}
    return MetadataImage(topics_by_name={"t": topic}, topics_by_id={TID: topic},
                         brokers=brokers)


def manager(tmp_path: Path, node: int = 1, min_isr: int = 1, **kw: Any) -> ReplicaManager:
    config = replace(LogConfig(), min_insync_replicas=min_isr)
    rm = ReplicaManager(LogManager(tmp_path, config), node, tmp_path, lambda t: config, **kw)
    rm.load(MetadataImage())
    return rm


def fetch(rm: ReplicaManager, p: int, offset: int, *, replica_id: int = -1,
          rack: str | None = "", max_wait_ms: int = 0, leader_epoch: int = -1) -> Any:
    params = FetchParams(replica_id, max_wait_ms, 1, 1 << 20, 0, False, rack)
    return rm.fetch_messages(params, [("t", TID, [(p, offset, 1 << 20, leader_epoch)])],
                             lambda results: results[0][2][0])


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_roles_follow_the_image(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path, node=1)
        await rm.sync(image({0: (1, 1, (1, 2, 3), (1, 2, 3), 0),
                             1: (2, 1, (1, 2, 3), (1, 2, 3), 0),
                             2: (2, 1, (2, 3), (2, 3), 0)}))
        p0, p1 = rm.get("t", 0), rm.get("t", 1)
        assert p0 is not None and p0.is_leader and p0.log.epochs.entries == [(1, 0)]
        assert p1 is not None and not p1.is_leader and p1.leader == 2
        assert rm.get("t", 2) is None  # not one of its replicas
        assert rm.append_to(p1, batch(), 1, 9).error == ErrorCode.not_leader_or_follower
        assert rm.append_to(p0, batch(), 1, 9).error == ErrorCode.none
        # leadership moves away: the leader becomes a follower of 2 in epoch 2
        await rm.sync(image({0: (2, 2, (1, 2, 3), (1, 2, 3), 1)}))
        assert rm.get("t", 1) is None and not p0.is_leader and p0.leader_epoch == 2
        assert rm.append_to(p0, batch(), 1, 9).error == ErrorCode.not_leader_or_follower
        # and back: a new epoch recorded at the log end
        await rm.sync(image({0: (1, 3, (1, 2, 3), (1, 2, 3), 2)}))
        assert p0.is_leader and p0.log.epochs.entries == [(1, 0), (3, 1)]
        await rm.stop()
        rm.log_manager.close()

    run(scenario())


def test_acks_all_below_min_isr_appends_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path, min_isr=2)
        await rm.sync(image({0: (1, 1, (1, 2, 3), (1,), 0)}))
        part = rm.get("t", 0)
        assert part is not None
        r = rm.append_to(part, batch(), -1, 9)
        assert r.error == ErrorCode.not_enough_replicas and part.log_end_offset == 0
        assert rm.append_to(part, batch(), 1, 9).error == ErrorCode.none  # acks=1 still works
        assert part.log_end_offset == 1 and part.high_watermark == 0
        rm.log_manager.close()

    run(scenario())


def test_acks_all_waits_for_the_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path)
        await rm.sync(image({0: (1, 1, (1, 2), (1, 2), 0)}))
        part = rm.get("t", 0)
        assert part is not None
        r = rm.append_to(part, batch(3), -1, 9)
        assert r.error == ErrorCode.none and r.last_offset == 2
        waiting = rm.delay_produce([(part, r.last_offset + 1, part.leader_epoch)], 60_000,
                                   lambda errors: errors)
        assert isinstance(waiting, asyncio.Future) and len(rm.produce_purgatory) == 1
        # the follower fetches at 3: its log ends there, the HW follows, the produce is done
        resp = fetch(rm, 0, 3, replica_id=2)
        assert resp.error_code == ErrorCode.none and resp.high_watermark == 3
        assert await asyncio.wait_for(waiting, 10) == [ErrorCode.none]
        # timed out: the batch stays in the log, the answer is REQUEST_TIMED_OUT
        r = rm.append_to(part, batch(), -1, 9)
        timed = rm.delay_produce([(part, r.last_offset + 1, part.leader_epoch)], 20,
                                 lambda errors: errors)
        assert await asyncio.wait_for(timed, 10) == [ErrorCode.request_timed_out]
        # leadership lost while waiting: NOT_LEADER_OR_FOLLOWER
        r = rm.append_to(part, batch(), -1, 9)
        lost = rm.delay_produce([(part, r.last_offset + 1, part.leader_epoch)], 60_000,
                                lambda errors: errors)
        await rm.sync(image({0: (2, 2, (1, 2), (2,), 1)}))
        assert await asyncio.wait_for(lost, 10) == [ErrorCode.not_leader_or_follower]
        await rm.stop()
        rm.log_manager.close()

    run(scenario())


def test_consumer_long_poll_on_a_replicated_leader_wakes_on_the_hw(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path)
        await rm.sync(image({0: (1, 1, (1, 2), (1, 2), 0)}))
        part = rm.get("t", 0)
        assert part is not None
        consumer = fetch(rm, 0, 0, max_wait_ms=60_000)
        follower = fetch(rm, 0, 0, replica_id=2, max_wait_ms=60_000)
        assert isinstance(consumer, asyncio.Future) and isinstance(follower, asyncio.Future)
        rm.append_to(part, batch(2), 1, 9)
        got = await asyncio.wait_for(follower, 10)  # the follower wakes on the append
        assert got.records and got.high_watermark == 0
        await asyncio.sleep(0.01)
        assert not consumer.done()  # nothing below the HW yet
        # the follower has it all: HW 2; its fetch that moved the HW answers at once with it
        moved = fetch(rm, 0, 2, replica_id=2, max_wait_ms=60_000)
        assert not isinstance(moved, asyncio.Future) and moved.high_watermark == 2
        got = await asyncio.wait_for(consumer, 10)
        assert got.records and got.high_watermark == 2
        await rm.stop()
        rm.log_manager.close()

    run(scenario())


def test_fetch_errors_by_role(tmp_path: Path) -> None:
    async def scenario() -> None:
        rm = manager(tmp_path, node=2)
        await rm.sync(image({0: (1, 1, (1, 2, 3), (1, 2, 3), 0)}))
        part = rm.get("t", 0)
        assert part is not None
        # a follower is fetched by nobody, and consumers without client metadata go to the
        # leader; with it (Fetch v11+), a follower serves them up to its HW (KIP-392)
        assert fetch(rm, 0, 0, replica_id=3).error_code == ErrorCode.not_leader_or_follower
        assert fetch(rm, 0, 0, rack=None).error_code == ErrorCode.not_leader_or_follower
        leader_rm = manager(tmp_path / "leader", node=1)
        await leader_rm.sync(image({0: (1, 1, (1, 2, 3), (1, 2, 3), 0)}))
        lp = leader_rm.get("t", 0)
        assert lp is not None
        for _ in range(4):
            assert leader_rm.append_to(lp, batch(), 1, 9).error == ErrorCode.none
        data = fetch(leader_rm, 0, 0, replica_id=2).records
        part.append_as_follower(data)
        part.update_follower_hw(2)
        served = fetch(rm, 0, 0, rack="")
        assert served.error_code == ErrorCode.none and served.high_watermark == 2
        assert len(served.records) < len(data)  # only below the follower's HW
        # a follower fetch with an old leader epoch is fenced
        assert fetch(leader_rm, 0, 0, replica_id=2, leader_epoch=0).error_code == \
            ErrorCode.fenced_leader_epoch
        await rm.stop()
        await leader_rm.stop()
        rm.log_manager.close()
        leader_rm.log_manager.close()

    run(scenario())


def test_preferred_read_replica_by_rack(tmp_path: Path) -> None:
    async def scenario() -> None:
        cfg = ReplicationConfig(replica_selector_class=RACK_AWARE_SELECTOR, broker_rack="a")
        rm = manager(tmp_path, config=cfg)
        racks = {1: "a", 2: "b", 3: "c"}
        await rm.sync(image({0: (1, 1, (1, 2, 3), (1, 2, 3), 0)}, racks))
        part = rm.get("t", 0)
        assert part is not None
        rm.append_to(part, batch(), 1, 9)
        rm.append_to(part, batch(), 1, 9)
        fetch(rm, 0, 2, replica_id=2)
        fetch(rm, 0, 1, replica_id=3)
        assert fetch(rm, 0, 0, rack="b").preferred_read_replica == 2
        assert fetch(rm, 0, 2, rack="c").preferred_read_replica == -1  # 3 lacks offset 2
        assert fetch(rm, 0, 0, rack="c").preferred_read_replica == 3
        same = fetch(rm, 0, 0, rack="a")  # the leader's own rack: read here
        assert same.preferred_read_replica == -1 and same.records
        assert fetch(rm, 0, 0, rack="z").preferred_read_replica == -1
        rm.log_manager.close()

    run(scenario())


def test_isr_changes_go_through_alter_partition(tmp_path: Path) -> None:
    async def scenario() -> None:
        sent: list[AlterPartitionItem] = []

        async def alter(item: AlterPartitionItem) -> AlterPartitionResult:
            sent.append(item)
            return AlterPartitionResult(ErrorCode.none, item.leader_id, item.leader_epoch,
                                        item.partition_epoch + 1, item.new_isr)

        rm = manager(tmp_path, alter_partition=alter,
                     config=ReplicationConfig(replica_lag_time_max_ms=50))
        await rm.sync(image({0: (1, 1, (1, 2, 3), (1, 2), 4)}))
        part = rm.get("t", 0)
        assert part is not None
        params = FetchParams(3, 0, 1, 1 << 20, 0, False, None, replica_epoch=17)
        rm.fetch_messages(params, [("t", TID, [(0, 0, 1 << 20, 1)])], lambda r: r)
        for _ in range(100):
            if part.isr == [1, 2, 3]:
                break
            await asyncio.sleep(0.01)
        assert sent[0].new_isr == (1, 2, 3) and sent[0].partition_epoch == 4
        assert sent[0].broker_epochs[3] == 17 and sent[0].topic_id == TID
        assert part.isr == [1, 2, 3] and part.partition_epoch == 5
        # nobody fetches any more and the leader appends: the ISR-expiration task shrinks it
        rm.append_to(part, batch(), 1, 9)
        for _ in range(300):
            if part.isr == [1]:
                break
            await asyncio.sleep(0.01)
        assert part.isr == [1] and sent[-1].new_isr == (1,)
        await rm.stop()
        rm.log_manager.close()

    run(scenario())
