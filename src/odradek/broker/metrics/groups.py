"""The group coordinator's families: groups by state, rebalances, and consumer lag.

Lag uses kafka-exporter's names (`kafka_consumergroup_lag{consumergroup,topic,partition}`,
`kafka_consumergroup_current_offset`, `kafka_consumergroup_lag_sum`,
`kafka_consumergroup_members`), lag in seconds kafka-lag-exporter's
(`kafka_consumergroup_group_lag_seconds{group,topic,partition}`, here: how long since the
group was last at the log end) and Burrow's status burrow-exporter's
(`kafka_burrow_status{group}`, Burrow's numbers: 1 OK, 2 WARN, 3 ERR, 4 STOP, 5 STALL,
6 REWIND). A node reports the groups it coordinates, with the same lag `odradek group
describe` shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from odradek.coordinator.group.classic import ClassicGroup, GroupState
from odradek.coordinator.group.lag import LagStatus
from odradek.coordinator.group.stats import REBALANCES

BURROW_CODES = {LagStatus.OK: 1, LagStatus.WARN: 2, LagStatus.ERR: 3, LagStatus.STOP: 4,
                LagStatus.STALL: 5, LagStatus.REWIND: 6}
_STATE_NAMES = {
    GroupState.STABLE: "numgroupsstable",
    GroupState.PREPARING_REBALANCE: "numgroupspreparingrebalance",
    GroupState.COMPLETING_REBALANCE: "numgroupscompletingrebalance",
    GroupState.EMPTY: "numgroupsempty",
    GroupState.DEAD: "numgroupsdead",
}


def coordinator_metrics(gc: Any, image: Any) -> Iterator[Metric]:
    groups = dict(gc.groups)
    with_offsets = set(gc.offsets.groups())
    names = set(groups) | with_offsets
    classic = Counter[GroupState]()
    consumer = Counter[str]()
    for gid in names:
        g = groups.get(gid)
        if g is None:
            classic[GroupState.EMPTY] += 1  # offsets only: Kafka's Empty group
        elif isinstance(g, ClassicGroup):
            classic[g.state] += 1
        else:
            consumer[g.state] += 1
    p = "kafka_coordinator_group_groupmetadatamanager_"
    yield GaugeMetricFamily(p + "numgroups", "Groups this node coordinates", value=len(names))
    for state, name in _STATE_NAMES.items():
        yield GaugeMetricFamily(p + name, f"Classic groups in state {state.value}",
                                value=classic[state])
    by_state = GaugeMetricFamily("kafka_server_group_coordinator_metrics_consumer_group_count",
                                 "Consumer (KIP-848) groups by state", labels=["state"])
    for state, n in sorted(consumer.items()):
        by_state.add_metric([state], n)
    yield by_state
    m = "kafka_server_group_coordinator_metrics_"
    yield GaugeMetricFamily(m + "classic_group_rebalance_count",
                            "Classic groups that began a rebalance, since start",
                            value=REBALANCES.classic_started)
    yield GaugeMetricFamily(m + "classic_group_completed_rebalance_count",
                            "Classic group rebalances that reached CompletingRebalance",
                            value=REBALANCES.classic_completed)
    yield GaugeMetricFamily(m + "consumer_group_rebalance_count",
                            "Consumer (KIP-848) group epoch bumps, since start",
                            value=REBALANCES.consumer)
    yield from _lag(gc, sorted(names), groups)


def _lag(gc: Any, names: list[str], groups: dict[str, Any]) -> Iterator[Metric]:
    tp = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Committed offset of the group", labels=tp)
    lag = GaugeMetricFamily("kafka_consumergroup_lag",
                            "Offsets between the committed one and the high watermark",
                            labels=tp)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of the group per topic",
                                labels=["consumergroup", "topic"])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group",
                                labels=["consumergroup"])
    seconds = GaugeMetricFamily("kafka_consumergroup_group_lag_seconds",
                                "Seconds since the group was last at the log end (0: no lag)",
                                labels=["group", "topic", "partition"])
    burrow = GaugeMetricFamily("kafka_burrow_status",
                               "Burrow's status of the group (1 OK, 2 WARN, 3 ERR)",
                               labels=["group"])
    burrow_part = GaugeMetricFamily(
        "kafka_burrow_partition_status",
        "Burrow's status of a partition (1 OK, 2 WARN, 4 STOP, 5 STALL, 6 REWIND)",
        labels=["group", "topic", "partition"])
    for gid in names:
        g = groups.get(gid)
        members.add_metric([gid], len(g.members) if g is not None else 0)
        status, rows = gc.group_lag(gid)
        burrow.add_metric([gid], BURROW_CODES[status])
        sums: Counter[str] = Counter()
        for row in rows:
            key = [gid, row.topic, str(row.partition)]
            if row.committed >= 0:
                current.add_metric(key, row.committed)
            if row.lag < 0:
                continue
            lag.add_metric(key, row.lag)
            sums[row.topic] += row.lag
            seconds.add_metric(key, row.lag_ms / 1000.0)
            burrow_part.add_metric(key, BURROW_CODES[row.status])
        for topic, n in sorted(sums.items()):
            lag_sum.add_metric([gid, topic], n)
    yield from (current, lag, lag_sum, members, seconds, burrow, burrow_part)
