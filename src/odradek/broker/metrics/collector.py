"""The node's metrics as Prometheus families, read from the node's state at scrape time.

Names follow what Prometheus's jmx_exporter (its example Kafka rules, lowercased) makes of
Kafka's MBeans: `kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`
becomes `kafka_server_brokertopicmetrics_messagesin_total{topic="T"}`; gauges drop the
`Value` attribute (`kafka_server_replicamanager_underreplicatedpartitions`). Where Kafka
reports a timer as percentiles, odradek gives a histogram of the same base name
(`kafka_network_requestmetrics_totaltimems_bucket`, `_count`, `_sum`): dashboards take
quantiles with histogram_quantile(). docs/metrics.md has the whole list.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from odradek.broker import refusals
from odradek.broker.metrics.groups import coordinator_metrics
from odradek.broker.metrics.quorum import controller_metrics
from odradek.broker.metrics.requests import BUCKETS_MS, request_name
from odradek.broker.node_view import NodeView
from odradek.protocol.apis import ApiKey
from odradek.storage.log_dir_failure import channel_for

# per-partition counters of replication.partition.Partition -> (family, help)
_TOPIC_COUNTERS = (
    ("messages_in", "kafka_server_brokertopicmetrics_messagesin",
     "Messages appended to the topic's partitions led here (MessagesInPerSec)"),
    ("bytes_in", "kafka_server_brokertopicmetrics_bytesin",
     "Bytes produced to the topic's partitions led here (BytesInPerSec)"),
    ("bytes_out", "kafka_server_brokertopicmetrics_bytesout",
     "Bytes fetched by consumers (BytesOutPerSec; replication excluded)"),
    ("produce_requests", "kafka_server_brokertopicmetrics_totalproducerequests",
     "Produce requests per topic-partition (TotalProduceRequestsPerSec)"),
    ("failed_produce", "kafka_server_brokertopicmetrics_failedproducerequests",
     "Produce requests refused for a partition (FailedProduceRequestsPerSec)"),
    ("fetch_requests", "kafka_server_brokertopicmetrics_totalfetchrequests",
     "Fetch requests per topic-partition (TotalFetchRequestsPerSec)"),
    ("failed_fetch", "kafka_server_brokertopicmetrics_failedfetchrequests",
     "Fetch requests refused for a partition (FailedFetchRequestsPerSec)"),
)


class NodeCollector(Collector):
    """Every family of one node; cheap enough to run per scrape on the event loop."""

    def __init__(self, view: NodeView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        view = self.view
        yield from self._requests()
        yield from self._connections()
        rm = view.replica_manager
        if rm is not None:
            yield from self._topics(rm)
            yield from self._replica_manager(rm)
            yield from self._logs(rm)
            yield from self._purgatories(rm)
        if view.log_manager is not None:
            yield from self._log_activity(view.log_manager)
        yield from controller_metrics(view)
        if view.group_coordinator is not None:
            yield from coordinator_metrics(view.group_coordinator, view.image)

    # -- requests -----------------------------------------------------------------------

    def _requests(self) -> Iterator[Metric]:
        stats = self.view.requests
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests", "Requests answered (RequestsPerSec)",
            labels=["request", "version"])
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes of the responses, by request and code (ErrorsPerSec; NONE: "
            "responses without an error)",
            labels=["request", "error"])
        hists = {
            "queue": HistogramMetricFamily(
                "kafka_network_requestmetrics_requestqueuetimems",
                "Time from the read that brought a request to its handler (RequestQueueTimeMs)",
                labels=["request"]),
            "local": HistogramMetricFamily(
                "kafka_network_requestmetrics_localtimems",
                "Time in the request's handler (LocalTimeMs)", labels=["request"]),
            "total": HistogramMetricFamily(
                "kafka_network_requestmetrics_totaltimems",
                "Time from receipt to answer, waits in purgatory included (TotalTimeMs)",
                labels=["request"]),
        }
        codes = {(_camel(api), error): n for (api, error), n in refusals.ERRORS.items()}
        erred = dict(refusals.ERRED)
        # Fetch's partition codes, counted by the reads that set them (replication.reading)
        fetch_errors = getattr(self.view.replica_manager, "fetch_errors", None)
        if fetch_errors is not None:
            fetch = request_name(ApiKey.FETCH)
            for code, n in fetch_errors.codes.items():
                key = (fetch, refusals.error_name(code))
                codes[key] = codes.get(key, 0) + n
            erred[ApiKey.FETCH] = erred.get(ApiKey.FETCH, 0) + fetch_errors.responses
        if stats is not None:
            for key, versions in stats.apis():
                name = request_name(key)
                for version, n in sorted(versions.items()):
                    requests.add_metric([name, str(version)], n)
                for attr, family in hists.items():
                    family.add_metric([name], _buckets(stats.buckets(attr, key)),
                                      stats.seconds(attr, key) * 1000.0)
                # NONE: the answered requests whose response carried no other code (counted
                # from the request count: the success path counts nothing for it)
                codes[(name, "NONE")] = max(
                    0, sum(versions.values()) - erred.get(key, 0))
        for (api, error), n in sorted(codes.items()):
            errors.add_metric([api, error], n)
        yield requests
        yield errors
        yield from hists.values()

    def _connections(self) -> Iterator[Metric]:
        count = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections (socket-server-metrics connection-count)", labels=["listener"])
        created = CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections accepted (connection-creation-total)", labels=["listener"])
        failed_auth = CounterMetricFamily(
            "kafka_server_socket_server_metrics_failed_authentication",
            "Failed authentications (failed-authentication-total)", labels=["listener"])
        by_listener: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        for server in self.view.servers:
            name = getattr(server, "listener_name", None) or "PLAINTEXT"
            row = by_listener[name]
            row[0] += len(server.connections)
            row[1] += server.created
            row[2] += getattr(server, "failed_authentications", 0)
        for name, (open_, made, failed) in sorted(by_listener.items()):
            count.add_metric([name], open_)
            created.add_metric([name], made)
            failed_auth.add_metric([name], failed)
        yield count
        yield created
        yield failed_auth

    # -- topics and partitions -------------------------------------------------------------

    def _topics(self, rm: Any) -> Iterator[Metric]:
        sums: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        replication_out = 0
        for part in list(rm.partitions.values()):
            topic = sums[part.topic]
            for attr, _, _ in _TOPIC_COUNTERS:
                topic[attr] += getattr(part, attr)
            replication_out += part.replication_bytes_out
        for attr, name, doc in _TOPIC_COUNTERS:
            family = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, values in sorted(sums.items()):
                family.add_metric([topic], values[attr])
            # Kafka's all-topics meter: jmx_exporter gives it the same name, no topic label
            family.samples.append(Sample(name + "_total", {},
                                         sum(v[attr] for v in sums.values())))
            yield family
        repl = CounterMetricFamily("kafka_server_brokertopicmetrics_replicationbytesout",
                                   "Bytes fetched by follower replicas (ReplicationBytesOutPerSec)")
        repl.add_metric([], replication_out)
        yield repl

    def _replica_manager(self, rm: Any) -> Iterator[Metric]:
        urp = leaders = under_min = at_min = shrinks = expands = 0
        parts = list(rm.partitions.values())
        for part in parts:
            shrinks += part.isr_shrinks
            expands += part.isr_expands
            if not part.is_leader:
                continue
            leaders += 1
            isr = len(part.isr)
            if isr < len(part.replicas):
                urp += 1
            min_isr = part.min_isr
            if isr < min_isr:
                under_min += 1
            elif isr == min_isr:
                at_min += 1
        log_dir = self.view.ctx.log_dir
        # per replica: with several log directories (JBOD) one failing takes only its own
        offline = sum(1 for part in parts if part.log.dir_state.offline)
        yield from _log_dir_health(rm.log_manager)
        try:
            disk = shutil.disk_usage(log_dir)
            yield _gauge("odradek_log_dir_free_bytes",
                         "Free bytes on the log directory's file system", disk.free)
            yield _gauge("odradek_log_dir_capacity_bytes",
                         "Size of the log directory's file system", disk.total)
        except OSError:
            pass  # the directory is gone: offlinereplicacount says so
        p = "kafka_server_replicamanager_"
        yield _gauge(p + "underreplicatedpartitions",
                     "Partitions led here whose ISR is smaller than their replicas", urp)
        yield _gauge(p + "underminisrpartitioncount",
                     "Partitions led here with fewer in-sync replicas than min.insync.replicas",
                     under_min)
        yield _gauge(p + "atminisrpartitioncount",
                     "Partitions led here with exactly min.insync.replicas in sync", at_min)
        yield _gauge(p + "leadercount", "Partitions led here", leaders)
        yield _gauge(p + "partitioncount", "Partitions hosted here", len(parts))
        yield _gauge(p + "offlinereplicacount",
                     "Replicas here whose log directory is offline", offline)
        yield _counter(p + "isrshrinks", "ISR shrinks of partitions led here", shrinks)
        yield _counter(p + "isrexpands", "ISR expansions of partitions led here", expands)

    def _logs(self, rm: Any) -> Iterator[Metric]:
        labels = ["topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of the partition's log",
                                 labels=labels)
        segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of the log",
                                     labels=labels)
        start = GaugeMetricFamily("kafka_log_log_logstartoffset", "The log's start offset",
                                  labels=labels)
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "The log's end offset",
                                labels=labels)
        for (topic, index), part in sorted(rm.partitions.items()):
            lg = part.log
            key = [topic, str(index)]
            segs = lg.segments
            size.add_metric(key, sum(s.size for s in segs))
            segments.add_metric(key, len(segs))
            start.add_metric(key, lg.log_start_offset)
            end.add_metric(key, lg.log_end_offset)
        yield size
        yield segments
        yield start
        yield end

    def _purgatories(self, rm: Any) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests waiting in a purgatory (long-poll fetches, acks=all produces)",
            labels=["delayedoperation"])
        family.add_metric(["Fetch"], len(rm.fetch_purgatory))
        family.add_metric(["Produce"], len(rm.produce_purgatory))
        yield family

    def _log_activity(self, log_manager: Any) -> Iterator[Metric]:
        cleaner = log_manager.cleaner
        passes = cleaner.passes if cleaner is not None else 0
        last = cleaner.last_stats if cleaner is not None else None
        yield _counter("odradek_log_cleaner_passes", "Log cleaner (compaction) passes done",
                       passes)
        yield _gauge("kafka_log_logcleaner_max_clean_time_secs",
                     "Seconds the last cleaner pass took (max-clean-time-secs)",
                     last.elapsed_s if last is not None else 0.0)
        recopy = (100.0 * last.bytes_written / last.bytes_read
                  if last is not None and last.bytes_read else 0.0)
        yield _gauge("kafka_log_logcleaner_cleaner_recopy_percent",
                     "Bytes written over bytes read by the last cleaner pass, in percent",
                     recopy)
        uncleanable = len(getattr(cleaner, "_uncleanable", ())) if cleaner is not None else 0
        yield _gauge("kafka_log_logcleanermanager_uncleanable_partitions_count",
                     "Logs the cleaner gave up on", uncleanable)
        yield _counter("odradek_log_retention_runs", "Retention passes over every log",
                       log_manager.retention_runs)
        yield _counter("odradek_log_retention_deleted_segments",
                       "Segments deleted by retention (time and size)",
                       log_manager.retention_deleted_segments)


def _buckets(counts: list[int]) -> list[tuple[str, int]]:
    out, running = [], 0
    for bound, n in zip((*BUCKETS_MS, float("inf")), counts, strict=True):
        running += n
        out.append(("+Inf" if bound == float("inf") else repr(bound), running))
    return out


def _camel(api: str) -> str:
    if api.startswith("api key "):
        return api
    return "".join(w.capitalize() for w in api.split("_"))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _log_dir_health(log_manager: Any) -> Iterator[Metric]:
    """Kafka's LogManager gauges: OfflineLogDirectoryCount, and LogDirectoryOffline per
    directory (1 offline, 0 online)."""
    dirs = list(getattr(log_manager, "log_dirs", []))
    offline = [d for d in dirs if channel_for(d).offline]
    yield _gauge("kafka_log_logmanager_offlinelogdirectorycount",
                 "Log directories offline (failed)", len(offline))
    family = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline",
                               "1 when the log directory is offline", labels=["logdirectory"])
    for d in dirs:
        family.add_metric([str(d)], 1 if d in offline else 0)
    yield family

