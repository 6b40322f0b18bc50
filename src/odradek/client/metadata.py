"""The native client's leader lookup: one Metadata v8 request for one topic.

Written once for the fetcher, the columnar producer and the end-to-end latency tool, with
the one list of errors that mean "the leader moved: look it up again" (`LEADER_CHANGE`) and
the one wait for a partition's new leader (`wait_leader`).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from odradek.client.connection import Connection, servers

__all__ = ["LEADER_CHANGE", "RETRY_BACKOFF_S", "TopicLeaders", "topic_leaders", "wait_leader"]

METADATA, METADATA_VERSION = 3, 8
LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER = 5, 6
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
# The answers of a broker that is not (or no longer, or not yet) the partition's leader, as
# Kafka's clients treat them: refresh the metadata and send again to the leader it names.
# A closed connection (the leader died) is handled the same way by the callers.
LEADER_CHANGE = frozenset({LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
                           UNKNOWN_LEADER_EPOCH})
# Kafka's retry.backoff.ms default.
RETRY_BACKOFF_S = 0.1


class TopicLeaders(NamedTuple):
    """One topic's answer: its error code (0 when found), the live brokers by id, the
    leader id of each partition (-1 without a leader) and each partition's leader epoch."""

    error_code: int
    brokers: dict[int, tuple[str, int]]
    leaders: dict[int, int]
    epochs: dict[int, int]


def topic_leaders(bootstrap: str, topic: str, client_id: str,
                  timeout_s: float = 30.0, security: Any = None) -> TopicLeaders | None:
    """Ask the first reachable bootstrap server for `topic`'s partition leaders. None when
    the answer does not name the topic; ConnectionError when no server can be reached.
    The caller turns an error code into its own exception (FetchError, ProduceError)."""
    from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic

    from odradek.protocol.messages import decode_response, encode_request

    last: Exception | None = None
    for host, port in servers(bootstrap):
        try:
            conn = Connection(host, port, client_id, timeout_s, 64 << 20, security)
        except OSError as exc:
            last = exc
            continue
        try:
            req = MetadataRequest(topics=(MetadataRequestTopic(name=topic),),
                                  allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
            corr = conn.send(METADATA, METADATA_VERSION, encode_request(req))
            meta: Any = decode_response(METADATA, METADATA_VERSION, conn.receive(corr), 4)
        finally:
            conn.close()
        brokers = {int(b.node_id): (b.host, int(b.port)) for b in meta.brokers}
        for t in meta.topics:
            if t.name == topic:
                return TopicLeaders(int(t.error_code.value), brokers,
                                    {int(p.partition_index): int(p.leader_id)
                                     for p in t.partitions},
                                    {int(p.partition_index): int(p.leader_epoch)
                                     for p in t.partitions})
        return None
    raise ConnectionError(f"cannot reach any bootstrap server: {last}")


def wait_leader(bootstrap: str, topic: str, partition: int, client_id: str, timeout_s: float,
                deadline: float, security: Any = None) -> tuple[str, int, int]:
    """(host, port, leader epoch) of `partition`'s leader, asking again every RETRY_BACKOFF_S until the
    metadata names one among its live brokers. The callers connect to it and come back
    here when that fails (a killed leader stays in the metadata until its session times
    out). Raises TimeoutError at `deadline` (time.monotonic()), naming the last answer."""
    last = "no answer"
    while True:
        try:
            found = topic_leaders(bootstrap, topic, client_id, timeout_s, security)
        except OSError as exc:
            found, last = None, f"no bootstrap server reachable ({exc})"
        if found is not None:
            node = found.leaders.get(partition, -1)
            addr = found.brokers.get(node)
            if found.error_code == 0 and addr is not None:
                return addr[0], addr[1], found.epochs.get(partition, -1)
            last = f"topic error {found.error_code}" if found.error_code else f"leader {node}"
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no leader for {topic}-{partition}: {last}")
        time.sleep(RETRY_BACKOFF_S)
