"""A Connect Cluster keeps one admin client for every caller (the mirror connectors ask it each
round, from the query's thread and the topic watch's), and lets it go on close.

Real confluent-kafka clients; none connects: making one and sharing it needs no broker.
"""

from __future__ import annotations

import threading

from odradek.connect.cluster import Cluster
from odradek.connect.connectors import mirror_io

# a port nothing listens on: the clients are made, never used
NOWHERE = "127.0.0.1:9"


def test_one_admin_client_per_cluster_from_any_thread() -> None:
    cluster = Cluster(NOWHERE, {"client.id": "odradek-test"})
    seen: list[object] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        seen.append(cluster.admin())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8
    assert all(client is seen[0] for client in seen)
    assert cluster.admin() is seen[0]
    assert cluster.admin() is cluster.admin()


def test_close_lets_the_client_go_and_the_next_call_makes_one() -> None:
    cluster = Cluster(NOWHERE)
    first = cluster.admin()
    assert cluster.admin() is first
    cluster.close()
    # `first` is still held here, so `is not` cannot be fooled by a reused address
    second = cluster.admin()
    assert second is not first
    assert cluster.admin() is second
    cluster.close()


def test_clusters_with_equal_settings_stay_equal_and_keep_their_own_client() -> None:
    a, b = Cluster(NOWHERE, {"acks": "all"}), Cluster(NOWHERE, {"acks": "all"})
    assert a == b  # the client is no part of the value
    assert a.admin() is not b.admin()


def test_the_offset_syncs_cluster_is_one_of_the_two_already_made() -> None:
    config = {"source.cluster.bootstrap.servers": NOWHERE,
              "target.cluster.bootstrap.servers": "127.0.0.1:10"}
    source = mirror_io.cluster_of(config, "source")
    target = mirror_io.cluster_of(config, "target")
    assert mirror_io.syncs_cluster(config, source, target) is source
    moved = {**config, "offset-syncs.topic.location": "target"}
    assert mirror_io.syncs_cluster(moved, source, target) is target
