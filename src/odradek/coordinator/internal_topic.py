"""Helpers shared by the coordinators' internal topics (`__consumer_offsets`,
`__transaction_state`): how they are created on a node with fewer brokers than their
default replication factor."""

from __future__ import annotations

from odradek.metadata.controller import CreatableTopic


def internal_topic_spec(name: str, partitions: int, wanted_rf: int, live_brokers: int,
                        configs: dict[str, str]) -> CreatableTopic:
    """A compacted internal topic with replication factor min(wanted, live brokers): Kafka
    refuses to create it with fewer live brokers than its factor (default 3), which on a
    single node would leave no coordinator at all."""
    rf = min(wanted_rf, max(1, live_brokers))
    return CreatableTopic(name, partitions, rf,
                          configs={"cleanup.policy": "compact", **configs})
