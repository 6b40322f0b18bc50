"""The controller's and the metadata quorum's families, and kafka-exporter's topic view.

As in Kafka, the cluster-wide controller gauges (offline partitions, fenced brokers, topic
and partition counts) are reported by the active controller only, 0 elsewhere, so a sum
over the cluster counts each once. The quorum's (raft-metrics) are every voter's own view.
kafka-exporter's per-partition gauges come from the node that leads the partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from odradek.broker.node_view import NodeView


def controller_metrics(view: NodeView) -> Iterator[Metric]:
    quorum = view.quorum
    image = view.image
    active = (quorum is not None and view.controller is not None
              and "controller" in view.roles and bool(quorum.is_leader))
    p = "kafka_controller_kafkacontroller_"
    yield GaugeMetricFamily(p + "activecontrollercount",
                            "1 on the active controller, 0 elsewhere", value=int(active))
    offline = partitions = topics = fenced = live = imbalance = 0
    if active and image is not None:
        for topic in image.topics_by_name.values():
            topics += 1
            for part in topic.partitions.values():
                partitions += 1
                if part.leader < 0:
                    offline += 1
                elif part.replicas and part.leader != part.replicas[0]:
                    imbalance += 1
        for reg in image.brokers.values():
            if reg.fenced:
                fenced += 1
            else:
                live += 1
    yield GaugeMetricFamily(p + "offlinepartitionscount", "Partitions without a leader",
                            value=offline)
    yield GaugeMetricFamily(p + "globalpartitioncount", "Partitions in the cluster",
                            value=partitions)
    yield GaugeMetricFamily(p + "globaltopiccount", "Topics in the cluster", value=topics)
    yield GaugeMetricFamily(p + "fencedbrokercount", "Registered brokers that are fenced",
                            value=fenced)
    yield GaugeMetricFamily(p + "activebrokercount", "Registered brokers that are unfenced",
                            value=live)
    yield GaugeMetricFamily(p + "preferredreplicaimbalancecount",
                            "Partitions not led by their preferred replica", value=imbalance)
    if quorum is not None:
        yield from _raft(quorum)
    if view.replica_manager is not None and image is not None:
        yield from _topic_partitions(view, image)


def _raft(quorum: Any) -> Iterator[Metric]:
    r = "kafka_server_raft_metrics_"
    leader = quorum.leader_id
    yield GaugeMetricFamily(r + "current_leader", "The quorum's leader (-1: unknown)",
                            value=-1 if leader is None else leader)
    yield GaugeMetricFamily(r + "current_epoch", "The quorum's epoch",
                            value=quorum.leader_epoch)
    yield GaugeMetricFamily(r + "high_watermark", "The metadata log's high watermark",
                            value=quorum.high_watermark)
    end = getattr(quorum, "end_offset", None)
    if end is not None:
        yield GaugeMetricFamily(r + "log_end_offset", "The metadata log's end offset",
                                value=end)
    commits = getattr(quorum, "commits", 0)
    if commits:
        yield GaugeMetricFamily(r + "commit_latency_avg",
                                "Mean ms from proposing records to their commit",
                                value=quorum.commit_latency_sum_ms / commits)
        yield GaugeMetricFamily(r + "commit_latency_max",
                                "Longest ms from proposing records to their commit",
                                value=quorum.commit_latency_max_ms)


def _topic_partitions(view: NodeView, image: Any) -> Iterator[Metric]:
    tp = ["topic", "partition"]
    current = GaugeMetricFamily("kafka_topic_partition_current_offset",
                                "High watermark of the partition", labels=tp)
    oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset",
                               "Log start offset of the partition", labels=tp)
    leader = GaugeMetricFamily("kafka_topic_partition_leader", "Leader of the partition",
                               labels=tp)
    replicas = GaugeMetricFamily("kafka_topic_partition_replicas", "Replicas of the partition",
                                 labels=tp)
    isr = GaugeMetricFamily("kafka_topic_partition_in_sync_replica",
                            "In-sync replicas of the partition", labels=tp)
    urp = GaugeMetricFamily("kafka_topic_partition_under_replicated_partition",
                            "1 when the partition's ISR is smaller than its replicas",
                            labels=tp)
    partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of the topic",
                                   labels=["topic"])
    node_id = view.node_id
    rm = view.replica_manager
    for name, topic in sorted(image.topics_by_name.items()):
        led = [p for p in topic.partitions.values() if p.leader == node_id]
        if not led:
            continue
        partitions.add_metric([name], len(topic.partitions))
        for p in sorted(led, key=lambda p: p.partition):
            key = [name, str(p.partition)]
            local = rm.get(name, p.partition)
            if local is not None:
                current.add_metric(key, local.high_watermark)
                oldest.add_metric(key, local.log_start_offset)
            leader.add_metric(key, p.leader)
            replicas.add_metric(key, len(p.replicas))
            isr.add_metric(key, len(p.isr))
            urp.add_metric(key, int(len(p.isr) < len(p.replicas)))
    yield from (partitions, current, oldest, leader, replicas, isr, urp)
    brokers = sum(1 for b in image.brokers.values() if not b.fenced)
    yield GaugeMetricFamily("kafka_brokers", "Unfenced brokers in the cluster", value=brokers)
