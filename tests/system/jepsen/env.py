"""What a workload needs to know about the cluster under test, filled in by the harness.

A workload never starts or faults nodes itself; it only gets addresses and names from here,
so the same workload runs against a plain `running_cluster` or the namespaced, proxied one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Env:
    # Client-facing bootstrap ("host:port,host:port"), through the fault proxy when it is on.
    bootstrap: str
    # Topics the data workloads (W1, W2, W4) write to; the harness creates them beforehand
    # with RF=3 and min.insync.replicas=2, or the workload creates them if they are missing.
    topics: list[str]
    partitions: int
    # Bootstrap for admin calls (topic creation, W3 churn); may bypass the proxy.
    admin_bootstrap: str
    # Extra librdkafka settings every client gets (timeouts suited to faults, debug, ...).
    client_config: dict[str, str] = field(default_factory=dict)
    replication_factor: int = 3
    # Keys ("topic-partition") without a leader when the final reads begin (`settle`): an
    # unclean shutdown of every in-sync replica leaves a partition offline (KIP-966, unclean
    # election off). The final reads skip them; what was acknowledged there counts as unseen.
    offline: set[str] = field(default_factory=set)
