"""The native client's leader lookup: one Metadata v8 request for one topic.

Written once for the fetcher, the columnar producer and the end-to-end latency tool.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from odradek.client.connection import Connection, servers

__all__ = ["TopicLeaders", "topic_leaders"]

METADATA, METADATA_VERSION = 3, 8


class TopicLeaders(NamedTuple):
    """One topic's answer: its error code (0 when found), the live brokers by id, and the
    leader id of each partition (-1 without a leader)."""

    error_code: int
    brokers: dict[int, tuple[str, int]]
    leaders: dict[int, int]


def topic_leaders(bootstrap: str, topic: str, client_id: str,
                  timeout_s: float = 30.0) -> TopicLeaders | None:
    """Ask the first reachable bootstrap server for `topic`'s partition leaders. None when
    the answer does not name the topic; ConnectionError when no server can be reached.
    The caller turns an error code into its own exception (FetchError, ProduceError)."""
    from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic

    from odradek.protocol.messages import decode_response, encode_request

    last: Exception | None = None
    for host, port in servers(bootstrap):
        try:
            conn = Connection(host, port, client_id, timeout_s, 64 << 20)
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
                                     for p in t.partitions})
        return None
    raise ConnectionError(f"cannot reach any bootstrap server: {last}")
