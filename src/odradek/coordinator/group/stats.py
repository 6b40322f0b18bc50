"""Rebalance counters of the group coordinator, read by the node's metrics collector.

Plain ints bumped where a group's state moves (Kafka's group-coordinator-metrics
`classic-group-rebalance-count`, `classic-group-completed-rebalance-count` and
`consumer-group-rebalance-count`). One per process: a node is one process.
"""

from __future__ import annotations


class RebalanceCounts:
    __slots__ = ("classic_completed", "classic_started", "consumer")

    def __init__(self) -> None:
        self.classic_started = 0  # classic groups entering PreparingRebalance
        self.classic_completed = 0  # classic groups entering CompletingRebalance
        self.consumer = 0  # consumer (KIP-848) group epoch bumps


REBALANCES = RebalanceCounts()
