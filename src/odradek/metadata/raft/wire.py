"""The raft messages on the wire: kio's Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch and
FetchSnapshot entities, at the versions Kafka 4 sends, to and from `messages.py`'s dataclasses.

As in Kafka, each request names the one partition `__cluster_metadata-0` (Fetch by its fixed
topic id, `METADATA_TOPIC_ID`), carries the cluster id, and the voter-side errors travel at the
partition level; a request for another cluster gets INCONSISTENT_CLUSTER_ID at the top level, one
for another topic or partition UNKNOWN_TOPIC_OR_PARTITION, a Vote or BeginQuorumEpoch addressed
to another voter INCONSISTENT_VOTER_SET. Directory ids (KIP-853) are not used: sent as zero.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from kio.schema.begin_quorum_epoch.v1 import request as bqe_req
from kio.schema.begin_quorum_epoch.v1 import response as bqe_resp
from kio.schema.end_quorum_epoch.v1 import request as eqe_req
from kio.schema.end_quorum_epoch.v1 import response as eqe_resp
from kio.schema.fetch.v17 import request as f_req
from kio.schema.fetch.v17 import response as f_resp
from kio.schema.fetch_snapshot.v1 import request as fs_req
from kio.schema.fetch_snapshot.v1 import response as fs_resp
from kio.schema.vote.v2 import request as v_req
from kio.schema.vote.v2 import response as v_resp

from odradek.metadata.raft import messages as m
from odradek.metadata.raft.log import SnapshotId
from odradek.protocol.errors import ErrorCode

__all__ = [
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "WireError",
    "request_body",
    "request_entity",
    "response_body",
    "response_entity",
]

METADATA_TOPIC = "__cluster_metadata"
# Kafka's Uuid.METADATA_TOPIC_ID (0, 1): the fixed topic id of __cluster_metadata
METADATA_TOPIC_ID = uuid.UUID(int=1)
FETCH_MAX_BYTES = 8 << 20  # Kafka's raft fetch max bytes


class WireError(Exception):
    """A request refused as a whole: answer it with `code` at the top level (or the partition
    level for `partition=True`)."""

    def __init__(self, code: ErrorCode, why: str, partition: bool = False) -> None:
        super().__init__(why)
        self.code = code
        self.partition = partition


def _leader(value: int | None) -> int:
    return -1 if value is None else value


def _named(value: int) -> int | None:
    return None if value < 0 else value


# ---- requests: the sender's side --------------------------------------------------------------

def request_entity(body: m.Body, dst: int, cluster_id: str | None) -> Any:
    """The kio request for a raft message addressed to voter `dst`."""
    if isinstance(body, m.VoteRequest):
        return v_req.VoteRequest(cluster_id=cluster_id, voter_id=dst, topics=(v_req.TopicData(
            topic_name=METADATA_TOPIC, partitions=(v_req.PartitionData(
                partition_index=0, replica_epoch=body.candidate_epoch,
                replica_id=body.candidate_id, replica_directory_id=None,
                voter_directory_id=None, last_offset_epoch=body.last_offset_epoch,
                last_offset=body.last_offset, pre_vote=body.pre_vote),)),))  # type: ignore[arg-type]
    if isinstance(body, m.BeginQuorumEpochRequest):
        return bqe_req.BeginQuorumEpochRequest(
            cluster_id=cluster_id, voter_id=dst, leader_endpoints=(),
            topics=(bqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=(
                bqe_req.PartitionData(partition_index=0, voter_directory_id=None,
                                      leader_id=body.leader_id,
                                      leader_epoch=body.leader_epoch),)),))  # type: ignore[arg-type]
    if isinstance(body, m.EndQuorumEpochRequest):
        return eqe_req.EndQuorumEpochRequest(
            cluster_id=cluster_id, leader_endpoints=(),
            topics=(eqe_req.TopicData(topic_name=METADATA_TOPIC, partitions=(
                eqe_req.PartitionData(
                    partition_index=0, leader_id=body.leader_id, leader_epoch=body.leader_epoch,
                    preferred_candidates=tuple(
                        eqe_req.ReplicaInfo(candidate_id=c, candidate_directory_id=None)
                        for c in body.preferred_successors)),)),))  # type: ignore[arg-type]
    if isinstance(body, m.FetchRequest):
        return f_req.FetchRequest(
            cluster_id=cluster_id,
            replica_state=f_req.ReplicaState(replica_id=body.replica_id),  # type: ignore[arg-type]
            max_wait=timedelta(milliseconds=body.max_wait_ms), min_bytes=0,  # type: ignore[arg-type]
            max_bytes=FETCH_MAX_BYTES, topics=(f_req.FetchTopic(
                topic_id=METADATA_TOPIC_ID, partitions=(f_req.FetchPartition(
                    partition=0, current_leader_epoch=body.current_leader_epoch,
                    fetch_offset=body.fetch_offset, last_fetched_epoch=body.last_fetched_epoch,
                    log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES),)),),  # type: ignore[arg-type]
            forgotten_topics_data=())
    if isinstance(body, m.FetchSnapshotRequest):
        return fs_req.FetchSnapshotRequest(
            cluster_id=cluster_id, replica_id=body.replica_id, max_bytes=body.max_bytes,  # type: ignore[arg-type]
            topics=(fs_req.TopicSnapshot(name=METADATA_TOPIC, partitions=(
                fs_req.PartitionSnapshot(
                    partition=0, current_leader_epoch=body.current_leader_epoch,
                    snapshot_id=fs_req.SnapshotId(end_offset=body.snapshot_id.end_offset,
                                                  epoch=body.snapshot_id.epoch),
                    position=body.position),)),))  # type: ignore[arg-type]
    raise TypeError(f"not a raft request: {type(body).__name__}")


def _one_partition(topics: Any, name_of: str, index_of: str) -> Any:
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise WireError(ErrorCode.invalid_request, "exactly one topic and partition expected")
    topic = topics[0]
    name = getattr(topic, name_of)
    if name not in (METADATA_TOPIC, METADATA_TOPIC_ID) or int(
            getattr(topic.partitions[0], index_of)) != 0:
        raise WireError(ErrorCode.unknown_topic_or_partition,
                        f"{name}: only {METADATA_TOPIC}-0 is replicated by the quorum",
                        partition=True)
    return topic.partitions[0]


def _cluster(entity: Any, cluster_id: str | None) -> None:
    theirs = getattr(entity, "cluster_id", None)
    if theirs is not None and cluster_id is not None and theirs != cluster_id:
        raise WireError(ErrorCode.inconsistent_cluster_id,
                        f"request for cluster {theirs}, this is {cluster_id}")


def request_body(entity: Any, local_id: int, cluster_id: str | None) -> tuple[int, m.Body]:
    """(sender id, message) of a raft request received; WireError when refused whole."""
    _cluster(entity, cluster_id)
    if isinstance(entity, v_req.VoteRequest):
        p = _one_partition(entity.topics, "topic_name", "partition_index")
        if int(entity.voter_id) not in (-1, local_id):
            raise WireError(ErrorCode.inconsistent_voter_set,
                            f"vote addressed to voter {entity.voter_id}, this is {local_id}",
                            partition=True)
        return int(p.replica_id), m.VoteRequest(
            int(p.replica_epoch), int(p.replica_id), int(p.last_offset_epoch),
            int(p.last_offset), bool(p.pre_vote))
    if isinstance(entity, bqe_req.BeginQuorumEpochRequest):
        p = _one_partition(entity.topics, "topic_name", "partition_index")
        if int(entity.voter_id) not in (-1, local_id):
            raise WireError(ErrorCode.inconsistent_voter_set,
                            f"BeginQuorumEpoch for voter {entity.voter_id}, this is {local_id}",
                            partition=True)
        return int(p.leader_id), m.BeginQuorumEpochRequest(int(p.leader_epoch), int(p.leader_id))
    if isinstance(entity, eqe_req.EndQuorumEpochRequest):
        p = _one_partition(entity.topics, "topic_name", "partition_index")
        return int(p.leader_id), m.EndQuorumEpochRequest(
            int(p.leader_epoch), int(p.leader_id),
            tuple(int(c.candidate_id) for c in p.preferred_candidates))
    if isinstance(entity, f_req.FetchRequest):
        topics = entity.topics
        if len(topics) == 1 and getattr(topics[0], "topic_id", None) is None:
            raise WireError(ErrorCode.unknown_topic_id, "no topic id")
        p = _one_partition(topics, "topic_id", "partition")
        state = getattr(entity, "replica_state", None)  # v15+; the replica id before
        replica = int(state.replica_id if state is not None else entity.replica_id)
        if replica < 0:
            raise WireError(ErrorCode.invalid_request, "a metadata fetch names its replica")
        wait = entity.max_wait
        wait_ms = int(wait.total_seconds() * 1000) if isinstance(wait, timedelta) else int(wait)
        return replica, m.FetchRequest(
            int(p.current_leader_epoch), replica, int(p.fetch_offset),
            int(p.last_fetched_epoch), max(0, wait_ms))
    if isinstance(entity, fs_req.FetchSnapshotRequest):
        p = _one_partition(entity.topics, "name", "partition")
        replica = int(entity.replica_id)
        return replica, m.FetchSnapshotRequest(
            int(p.current_leader_epoch), replica,
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            int(p.position), max(0, int(entity.max_bytes)))
    raise WireError(ErrorCode.invalid_request, f"not a raft request: {type(entity).__name__}")


# ---- responses: the voter's side ----------------------------------------------------------------

def response_entity(body: m.Body | None, request: Any, error: WireError | None = None) -> Any:
    """The kio response to `request`: from the client's answer, or from a refusal."""
    top = partition_code = ErrorCode.none
    if error is not None:
        if error.partition:
            partition_code = error.code
        else:
            top = error.code
    code = ErrorCode(body.error) if body is not None else partition_code  # type: ignore[union-attr]
    epoch = getattr(body, "leader_epoch", -1)
    leader = _leader(getattr(body, "leader_id", None))
    if isinstance(request, v_req.VoteRequest):
        granted = bool(getattr(body, "vote_granted", False))
        parts = () if top else (v_resp.TopicData(topic_name=METADATA_TOPIC, partitions=(
            v_resp.PartitionData(partition_index=0, error_code=code, leader_id=leader,
                                 leader_epoch=epoch, vote_granted=granted),)),)  # type: ignore[arg-type]
        return v_resp.VoteResponse(error_code=top, topics=parts)
    if isinstance(request, bqe_req.BeginQuorumEpochRequest):
        parts = () if top else (bqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=(
            bqe_resp.PartitionData(partition_index=0, error_code=code, leader_id=leader,
                                   leader_epoch=epoch),)),)  # type: ignore[arg-type]
        return bqe_resp.BeginQuorumEpochResponse(error_code=top, topics=parts)
    if isinstance(request, eqe_req.EndQuorumEpochRequest):
        parts = () if top else (eqe_resp.TopicData(topic_name=METADATA_TOPIC, partitions=(
            eqe_resp.PartitionData(partition_index=0, error_code=code, leader_id=leader,
                                   leader_epoch=epoch),)),)  # type: ignore[arg-type]
        return eqe_resp.EndQuorumEpochResponse(error_code=top, topics=parts)
    if isinstance(request, f_req.FetchRequest):
        records = b""
        div = f_resp.EpochEndOffset()
        snap = f_resp.SnapshotId()
        hw = -1
        if isinstance(body, m.FetchResponse):
            records = body.records if isinstance(body.records, (bytes, memoryview)) else b""
            hw = body.high_watermark
            if body.diverging_epoch is not None:
                div = f_resp.EpochEndOffset(epoch=body.diverging_epoch.epoch,  # type: ignore[arg-type]
                                            end_offset=body.diverging_epoch.end_offset)  # type: ignore[arg-type]
            if body.snapshot_id is not None:
                snap = f_resp.SnapshotId(end_offset=body.snapshot_id.end_offset,  # type: ignore[arg-type]
                                         epoch=body.snapshot_id.epoch)  # type: ignore[arg-type]
        parts = () if top else (f_resp.FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=(
            f_resp.PartitionData(
                partition_index=0, error_code=code, high_watermark=hw, diverging_epoch=div,
                current_leader=f_resp.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch),
                snapshot_id=snap, aborted_transactions=None, records=bytes(records)),)),)  # type: ignore[arg-type]
        return f_resp.FetchResponse(throttle_time=timedelta(0), error_code=top, responses=parts)  # type: ignore[arg-type]
    if isinstance(request, fs_req.FetchSnapshotRequest):
        sid = getattr(body, "snapshot_id", None)
        if sid is None:  # refused: echo the snapshot asked for, if there was one
            asked = [p.snapshot_id for t in request.topics for p in t.partitions][:1]
            sid = (SnapshotId(int(asked[0].end_offset), int(asked[0].epoch)) if asked
                   else SnapshotId(-1, -1))
        parts = () if top else (fs_resp.TopicSnapshot(name=METADATA_TOPIC, partitions=(
            fs_resp.PartitionSnapshot(
                index=0, error_code=code,
                snapshot_id=fs_resp.SnapshotId(end_offset=sid.end_offset, epoch=sid.epoch),  # type: ignore[arg-type]
                current_leader=fs_resp.LeaderIdAndEpoch(leader_id=leader, leader_epoch=epoch),  # type: ignore[arg-type]
                size=getattr(body, "size", 0), position=getattr(body, "position", 0),  # type: ignore[arg-type]
                unaligned_records=getattr(body, "data", b"")),)),)  # type: ignore[arg-type]
        return fs_resp.FetchSnapshotResponse(throttle_time=timedelta(0), error_code=top,  # type: ignore[arg-type]
                                             topics=parts)
    raise TypeError(f"not a raft request: {type(request).__name__}")


def response_body(request: m.Body, entity: Any) -> m.Body:
    """The client's message for a kio response to one of our requests. A top-level error, or a
    response without our partition, becomes the partition-level error."""
    top = int(entity.error_code)
    topics = getattr(entity, "topics", None)
    if topics is None:
        topics = getattr(entity, "responses", ())
    p = topics[0].partitions[0] if topics and topics[0].partitions else None
    code = top if top else (int(p.error_code) if p is not None else int(ErrorCode.unknown_server_error))
    if isinstance(request, m.VoteRequest):
        if p is None:
            return m.VoteResponse(code, -1, None, False, request.pre_vote)
        return m.VoteResponse(code, int(p.leader_epoch), _named(int(p.leader_id)),
                              bool(p.vote_granted), request.pre_vote)
    if isinstance(request, m.BeginQuorumEpochRequest):
        if p is None:
            return m.BeginQuorumEpochResponse(code, -1, None)
        return m.BeginQuorumEpochResponse(code, int(p.leader_epoch), _named(int(p.leader_id)))
    if isinstance(request, m.EndQuorumEpochRequest):
        if p is None:
            return m.EndQuorumEpochResponse(code, -1, None)
        return m.EndQuorumEpochResponse(code, int(p.leader_epoch), _named(int(p.leader_id)))
    if isinstance(request, m.FetchRequest):
        if p is None:
            return m.FetchResponse(code, -1, None, -1)
        div = p.diverging_epoch
        snap = p.snapshot_id
        return m.FetchResponse(
            code, int(p.current_leader.leader_epoch), _named(int(p.current_leader.leader_id)),
            int(p.high_watermark), records=bytes(p.records or b""),
            diverging_epoch=m.DivergingEpoch(int(div.epoch), int(div.end_offset))
            if int(div.epoch) >= 0 and int(div.end_offset) >= 0 else None,
            snapshot_id=SnapshotId(int(snap.end_offset), int(snap.epoch))
            if int(snap.end_offset) >= 0 and int(snap.epoch) >= 0 else None)
    if isinstance(request, m.FetchSnapshotRequest):
        if p is None:
            return m.FetchSnapshotResponse(code, -1, None, request.snapshot_id)
        return m.FetchSnapshotResponse(
            code, int(p.current_leader.leader_epoch), _named(int(p.current_leader.leader_id)),
            SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch)),
            int(p.size), int(p.position), bytes(p.unaligned_records or b""))
    raise TypeError(f"not a raft request: {type(request).__name__}")
