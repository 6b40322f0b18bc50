"""Three KRaftQuorums (and an observer) over real loopback sockets, in one process: election,
commit, failover, a divergent tail truncated, a wiped voter caught up by snapshot, and bad
input answered with Kafka's error codes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from odradek.metadata.raft.wire import METADATA_TOPIC
from odradek.network import Channel
from odradek.protocol.errors import ErrorCode, KafkaError

from .kraft_support import CLUSTER_ID, Cluster, run, topic, wait_for


def log_bytes(node: object, end: int) -> bytes:
    """The node's metadata log from its start up to `end`, as stored."""
    raft_log = node.q.raft_log  # type: ignore[attr-defined]
    out = b""
    offset = raft_log.start_offset()
    while offset < end:
        data = raft_log.read(offset)
        assert data, (offset, end)
        from odradek.protocol.records import iter_batches
        for header, batch in iter_batches(data):
            if header.base_offset >= end:
                return out
            out += bytes(batch)
            offset = header.last_offset + 1
    return out


def test_three_voters_elect_commit_and_replicate_byte_identical(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path, voters=3, observers=1)
        await c.start_all()
        try:
            lead = await c.leader()
            offsets = [await c.append(lead, topic(f"t{i}")) for i in range(5)]
            assert offsets == sorted(offsets)
            # every node, the observer (4) too, hears every batch once, in order
            await wait_for(lambda: all(n.state.names == [f"t{i}" for i in range(5)]
                                       for n in c.nodes.values()), 20, "all nodes replayed")
            hw = lead.q.high_watermark
            await wait_for(lambda: all(n.q.high_watermark == hw for n in c.nodes.values()), 20,
                           "the high watermark everywhere")
            same = {log_bytes(n, hw) for n in c.nodes.values()}
            assert len(same) == 1  # the same batches, offsets and CRCs on every replica
            d = lead.q.describe()
            assert d.is_leader and d.leader_id == lead.node_id and d.high_watermark == hw
            assert sorted(v.replica_id for v in d.voters) == [1, 2, 3]
            assert [o.replica_id for o in d.observers] == [4]
            # the observer never votes nor leads
            assert c.nodes[4].q.leader_id == lead.node_id and not c.nodes[4].q.is_leader
            follower = next(n for n in c.up() if n.node_id not in (lead.node_id, 4))
            with pytest.raises(KafkaError) as err:
                await c.append(follower, topic("nope"))
            assert err.value.code == ErrorCode.not_controller
        finally:
            await c.stop_all()
    run(main())


def test_leader_killed_fails_over_and_the_old_leader_catches_up(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start_all()
        try:
            first = await c.leader()
            await c.append(first, topic("before"))
            epoch = first.q.leader_epoch
            await c.stop(first.node_id)
            second = await c.leader(other_than=first.node_id)
            assert second.q.leader_epoch > epoch
            await c.append(second, topic("after"))
            await c.start(first.node_id)
            back = c.nodes[first.node_id]
            await wait_for(lambda: back.state.names == ["before", "after"], 20,
                           "the old leader replaying the new leader's log")
            hw = second.q.high_watermark
            await wait_for(lambda: back.q.high_watermark >= hw, 20, "the old leader's HW")
            assert log_bytes(back, hw) == log_bytes(second, hw)
        finally:
            await c.stop_all()
    run(main())


def test_a_cut_off_leader_loses_its_uncommitted_tail(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start_all()
        try:
            old = await c.leader()
            await c.append(old, topic("committed"))
            end_before = old.q.end_offset
            await c.isolate(old.node_id)
            # the cut-off leader appends, but cannot commit: the append fails once it resigns
            pending = asyncio.ensure_future(c.append(old, topic("divergent")))
            await wait_for(lambda: old.q.end_offset > end_before, 10, "the divergent append")
            new = await c.leader(other_than=old.node_id)
            await c.append(new, topic("winner"))
            with pytest.raises(KafkaError) as err:
                await pending
            assert err.value.code == ErrorCode.not_controller
            c.heal()
            await wait_for(lambda: old.state.names == ["committed", "winner"], 30,
                           "the old leader truncating and following")
            hw = new.q.high_watermark
            await wait_for(lambda: old.q.high_watermark >= hw, 20, "the old leader's HW")
            assert log_bytes(old, hw) == log_bytes(new, hw)
            # nobody ever heard the divergent record
            assert all("divergent" not in n.state.names for n in c.nodes.values())
        finally:
            await c.stop_all()
    run(main())


def test_a_wiped_voter_is_caught_up_by_snapshot(tmp_path: Path) -> None:
    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start_all()
        try:
            lead = await c.leader()
            for i in range(20):
                await c.append(lead, topic(f"s{i}"))
            lead.q.request_snapshot()
            snap = await wait_for(lambda: lead.q.raft_log.latest_snapshot(), 20, "a snapshot")
            assert lead.q.raft_log.start_offset() == snap.end_offset > 0
            assert (lead.data_dir / "__cluster_metadata-0" /
                    f"{snap.end_offset:020d}-{snap.epoch:010d}.checkpoint").exists()
            victim = next(n for n in c.up() if n is not lead)
            await c.stop(victim.node_id)
            c.wipe(victim.node_id)
            await c.append(lead, topic("later"))
            await c.start(victim.node_id)
            want = [f"s{i}" for i in range(20)] + ["later"]
            await wait_for(lambda: victim.state.names == want, 30, "the wiped voter caught up")
            assert victim.state.snapshots == 1
            assert victim.q.raft_log.latest_snapshot() == snap
            # and it restarts from its own snapshot, not from offset 0
            await c.stop(victim.node_id)
            await c.start(victim.node_id)
            await wait_for(lambda: victim.state.names == want, 30, "the restart replayed")
            assert victim.state.snapshots == 1
        finally:
            await c.stop_all()
    run(main())


def test_bad_raft_requests_get_kafkas_error_codes(tmp_path: Path) -> None:
    from kio.schema.begin_quorum_epoch.v1 import request as bqe
    from kio.schema.describe_quorum.v2 import request as dq
    from kio.schema.vote.v2 import request as vote

    from odradek.metadata.raft import messages as m
    from odradek.metadata.raft.wire import request_entity

    async def main() -> None:
        c = Cluster(tmp_path)
        await c.start_all()
        try:
            lead = await c.leader()
            target = next(n for n in c.up() if n is not lead)
            ch = Channel("127.0.0.1", target.port, "bad-input")
            epoch = lead.q.leader_epoch

            async def partition_error(entity: object) -> tuple[int, int]:
                resp = await ch.request(entity, 5.0)
                topics = getattr(resp, "topics", ())
                code = int(topics[0].partitions[0].error_code) if topics else -1
                return int(resp.error_code), code

            # a vote from a node outside the quorum
            outsider = request_entity(m.VoteRequest(epoch + 1, 9, epoch, 10**6), target.node_id,
                                      CLUSTER_ID)
            assert await partition_error(outsider) == (0, ErrorCode.inconsistent_voter_set)
            # a vote in a stale epoch
            stale = request_entity(m.VoteRequest(epoch - 1, lead.node_id, 0, 0), target.node_id,
                                   CLUSTER_ID)
            assert await partition_error(stale) == (0, ErrorCode.fenced_leader_epoch)
            # a stale leader's BeginQuorumEpoch
            begin = request_entity(m.BeginQuorumEpochRequest(epoch - 1, lead.node_id),
                                   target.node_id, CLUSTER_ID)
            assert isinstance(begin, bqe.BeginQuorumEpochRequest)
            assert await partition_error(begin) == (0, ErrorCode.fenced_leader_epoch)
            # another cluster
            other = request_entity(m.VoteRequest(epoch + 1, lead.node_id, epoch, 0),
                                   target.node_id, "another-cluster")
            assert (await partition_error(other))[0] == ErrorCode.inconsistent_cluster_id
            # addressed to another voter
            wrong = request_entity(m.VoteRequest(epoch + 1, lead.node_id, epoch, 0), 7,
                                   CLUSTER_ID)
            assert isinstance(wrong, vote.VoteRequest)
            assert await partition_error(wrong) == (0, ErrorCode.inconsistent_voter_set)
            # a fetch in a stale epoch, straight to the leader
            lch = Channel("127.0.0.1", lead.port, "bad-input")
            fetch = request_entity(m.FetchRequest(epoch - 1, target.node_id, 0, 0), lead.node_id,
                                   CLUSTER_ID)
            resp = await lch.request(fetch, 5.0)
            assert int(resp.responses[0].partitions[0].error_code) == ErrorCode.fenced_leader_epoch
            # DescribeQuorum: the leader answers; a follower says where the leader is
            ask = dq.DescribeQuorumRequest(topics=(dq.TopicData(
                topic_name=METADATA_TOPIC, partitions=(dq.PartitionData(partition_index=0),)),))
            d = await lch.request(ask, 5.0)
            part = d.topics[0].partitions[0]
            assert int(part.error_code) == 0 and int(part.leader_id) == lead.node_id
            assert sorted(int(v.replica_id) for v in part.current_voters) == [1, 2, 3]
            d = await ch.request(ask, 5.0)
            assert int(d.topics[0].partitions[0].error_code) == ErrorCode.not_leader_or_follower
            await ch.close()
            await lch.close()
            # the quorum is still healthy
            await c.append(await c.leader(), topic("still-fine"))
        finally:
            await c.stop_all()
    run(main())
