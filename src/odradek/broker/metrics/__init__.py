"""The node's metrics, named as Kafka's JMX exporter and kafka-exporter name them.

The hot path only bumps plain ints (C ones in `requests.RequestStats`' table, _record.c;
the partitions' counters in `replication`, the coordinator's in `coordinator`); everything
else (gauges of partitions, the quorum, groups and lag, the logs) is read from the node's
state when Prometheus scrapes, by the custom collectors here. docs/metrics.md lists every name.
"""
