"""Connector plugins: what a connector class declares, the fields every connector shares
(Kafka's ConnectorConfig and SinkConnectorConfig), and the lookup by class name or alias.

A plugin is named as Kafka names it: its full class name, its simple name, or the simple
name without "Connector" (`FileStreamSource`). It validates its config, splits it into task
configs, checks offsets a user writes (KIP-875), and starts its Spark query (`start`, given a
`RunContext` by the worker).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from odradek.connect import converters, transforms
from odradek.connect.cluster import Cluster
from odradek.connect.configdef import Field, Validation, as_list

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def _converter_check(which: str) -> Any:
    def check(raw: str, config: Mapping[str, str]) -> list[str]:
        return converters.class_errors(which, config, {})

    return check


def _name_check(raw: str, config: Mapping[str, str]) -> list[str]:
    if not raw.strip():
        return ["Connector name is required"]
    if any(ord(c) < 32 for c in raw):
        return ["Connector name may not contain ISO control characters"]
    return []


COMMON = (
    Field("name", "STRING", None, "HIGH", "Globally unique name to use for this connector.",
          check=_name_check),
    Field("connector.class", "STRING", None, "HIGH",
          "Name or alias of the class for this connector."),
    Field("tasks.max", "INT", "1", "HIGH",
          "Maximum number of tasks to use for this connector (the Spark query's parallelism).",
          at_least=1),
    Field("key.converter", "CLASS", converters.JSON, "LOW",
          "Converter class for the keys of records (else the worker's).",
          check=lambda raw, c: _converter_check("key.converter")(raw, c)
          if "key.converter" in c else []),
    Field("value.converter", "CLASS", converters.JSON, "LOW",
          "Converter class for the values of records (else the worker's).",
          check=lambda raw, c: _converter_check("value.converter")(raw, c)
          if "value.converter" in c else []),
    Field("transforms", "LIST", "", "LOW",
          "Aliases for the transformations to be applied to records.", group="Transforms"),
    Field("predicates", "LIST", "", "LOW",
          "Aliases for the predicates used by transformations.", group="Predicates"),
    Field("errors.tolerance", "STRING", "none", "MEDIUM",
          "Behavior for tolerating errors during connector operation: 'none' fails the task "
          "at the first error, 'all' skips problematic records.", group="Error Handling",
          recommended=("none", "all")),
    Field("errors.log.enable", "BOOLEAN", "false", "MEDIUM",
          "If true, write each error and the details of the failed operation to the log.",
          group="Error Handling"),
    Field("errors.log.include.messages", "BOOLEAN", "false", "MEDIUM",
          "Whether to include in the log the record that caused a failure (its topic, "
          "partition and offset).", group="Error Handling"),
)


def _topics_check(raw: str, config: Mapping[str, str]) -> list[str]:
    has_list = bool(as_list(config.get("topics")))
    has_regex = bool(config.get("topics.regex", "").strip())
    if has_list and has_regex:
        return ["topics and topics.regex are mutually exclusive options, but both are set."]
    if not has_list and not has_regex:
        return ["Must configure one of topics or topics.regex"]
    return []


def _regex_check(raw: str, config: Mapping[str, str]) -> list[str]:
    if not raw:
        # Kafka puts the "one of" error on both fields.
        return [] if as_list(config.get("topics")) else _topics_check(raw, config)
    try:
        re.compile(raw)
    except re.error as exc:
        return [f"Invalid value {raw} for configuration topics.regex: {exc}"]
    return []


def _dlq_check(raw: str, config: Mapping[str, str]) -> list[str]:
    topic = raw.strip()
    if not topic:
        return []
    regex = config.get("topics.regex", "").strip()
    if topic in as_list(config.get("topics")) or (regex and re.fullmatch(regex, topic)):
        return [f"The DLQ topic '{topic}' may not be included in the list of topics "
                f"('topics.regex' or 'topics') consumed by the connector"]
    return []


SINK = (
    Field("topics", "LIST", "", "HIGH", "List of topics to consume, separated by commas.",
          check=_topics_check),
    Field("topics.regex", "STRING", "", "HIGH",
          "Regular expression giving the topics to consume.", check=_regex_check),
    Field("errors.deadletterqueue.topic.name", "STRING", "", "MEDIUM",
          "The topic records that fail are written to (empty: no dead letter queue).",
          group="Error Handling", check=_dlq_check),
    Field("errors.deadletterqueue.topic.replication.factor", "SHORT", "3", "MEDIUM",
          "Replication factor of the dead letter queue topic when it is created.",
          group="Error Handling"),
    Field("errors.deadletterqueue.context.headers.enable", "BOOLEAN", "false", "MEDIUM",
          "If true, add __connect.errors.* headers with the error's context to the dead "
          "letter queue's records.", group="Error Handling"),
)


@dataclass
class RunContext:
    """What the worker gives a connector's `start`."""

    spark: SparkSession
    name: str
    cluster: Cluster
    config: dict[str, str]
    worker_config: Mapping[str, str]
    checkpoint: str
    # Source: the stored offsets, (partition, offset). Sink: {topic: {partition: offset}}.
    offsets: Any = None
    tasks: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    # Set by the worker when this start's query is stopped (threads the connector starts for
    # it end on it).
    stopped: threading.Event = field(default_factory=threading.Event)
    # ConnectorContext.requestTaskReconfiguration: the connector's inputs changed (the reason
    # given); the worker stops its query and starts it again from the stored offsets.
    reconfigure: Callable[[str], None] = lambda reason: None


class NotReady(RuntimeError):
    """Raised by `start` when what the query reads does not exist yet: not a failure, the
    worker starts it again later."""


class ConnectorPlugin:
    class_name: str = ""
    type: str = ""  # "source" | "sink"
    version: str = ""
    fields: tuple[Field, ...] = ()
    # Where the query's delivery guarantee stands, said per connector.
    delivery: str = "at-least-once"

    @property
    def aliases(self) -> tuple[str, ...]:
        simple = self.class_name.rsplit(".", 1)[-1]
        short = simple[:-len("Connector")] if simple.endswith("Connector") else simple
        return (self.class_name, simple, short)

    def all_fields(self) -> list[Field]:
        base = list(COMMON) + (list(SINK) if self.type == "sink" else [])
        return base + list(self.fields)

    def validate(self, config: Mapping[str, str]) -> Validation:
        extra = self.extra_errors(config)
        for key, messages in transforms.errors(config).items():
            extra.setdefault(key, []).extend(messages)
        return Validation(self.class_name, self.all_fields(), config, extra)

    def extra_errors(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        return {}

    def task_configs(self, config: Mapping[str, str], max_tasks: int) -> list[dict[str, str]]:
        return [dict(config)]

    def offset_errors(self, partition: dict[str, Any], offset: dict[str, Any] | None) -> list[str]:
        return []

    def start(self, ctx: RunContext) -> StreamingQuery:
        raise NotImplementedError

    def source_offset(self, config: Mapping[str, str],
                      end: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Source connectors: the Connect offsets for a query's source end offset."""
        return []

    def info(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.type, "version": self.version}


class Plugins:
    def __init__(self, plugins: list[ConnectorPlugin]) -> None:
        self.plugins = plugins
        self._by_name: dict[str, ConnectorPlugin] = {}
        for plugin in plugins:
            for alias in plugin.aliases:
                self._by_name[alias] = plugin

    def find(self, name: str) -> ConnectorPlugin | None:
        return self._by_name.get(name.strip())

    def validate(self, config: Mapping[str, str]) -> Validation:
        """Every field of the named class, or the common ones with the class's error."""
        cls = config.get("connector.class", "")
        plugin = self.find(cls)
        if plugin is None:
            extra = {"connector.class": [
                'Missing required configuration "connector.class" which has no default '
                "value." if not cls else
                f"Failed to find any class that implements Connector and which name matches "
                f"{cls}, available connectors are: "
                f"{', '.join(p.class_name for p in self.plugins)}"]}
            fields = [f for f in COMMON if f.name != "connector.class"]
            fields.insert(1, Field("connector.class", "STRING", "", "HIGH",
                                   "Name or alias of the class for this connector."))
            return Validation(cls or "unknown", fields, config, extra)
        return plugin.validate(config)
