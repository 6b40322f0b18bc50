"""What every sink connector shares: its topics as a stream from the committed offsets.

The stream starts where the group `connect-<name>` says (every partition named: a partition
with no committed offset starts at the earliest, as Connect's sink consumers do), and each
micro-batch is handed to the connector's writer. The worker commits the query's end offsets
to the group after each batch, so a restarted connector resumes, at least once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.connect.configdef import as_list
from odradek.connect.plugins import NotReady, RunContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

EARLIEST = -2
# What a sink's writer gets per record (the odradek source's columns, headers included).
COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
# How often a micro-batch is planned: the time between a record's arrival and its delivery.
TRIGGER = "1 second"


class TopicsNotReady(NotReady):
    """The topics are not there yet: the worker keeps the connector RUNNING and tries again,
    as Kafka's sink consumer waits for a topic it subscribed to."""


def topics_of(ctx: RunContext) -> dict[str, int]:
    """The topics read, with their partition counts (topics.regex is matched now)."""
    meta = ctx.cluster.admin().list_topics(timeout=30)
    regex = ctx.config.get("topics.regex", "").strip()
    names = ([t for t in sorted(meta.topics) if re.fullmatch(regex, t)] if regex
             else as_list(ctx.config.get("topics")))
    missing = [t for t in names if t not in meta.topics]
    if missing or not names:
        raise TopicsNotReady(f"no such topic: {', '.join(missing)}" if missing
                           else f"no topic matches topics.regex {regex!r}")
    return {t: len(meta.topics[t].partitions) for t in names}


def starting_offsets(topics: dict[str, int], committed: dict[str, dict[int, int]]) -> str:
    return json.dumps({t: {str(p): committed.get(t, {}).get(p, EARLIEST) for p in range(n)}
                       for t, n in topics.items()})


def stream(ctx: RunContext) -> DataFrame:
    topics = topics_of(ctx)
    df = (ctx.spark.readStream.format("odradek").options(**ctx.cluster.spark_options())
          .option("subscribe", ",".join(topics)).option("includeHeaders", "true")
          .option("startingOffsets", starting_offsets(topics, ctx.offsets or {}))
          .load())
    # tasks.max bounds the query's parallelism (a partition's records stay in order).
    return df.coalesce(max(1, ctx.tasks))


def start_each_batch(ctx: RunContext, df: DataFrame,
                     write: Callable[[DataFrame, int], None]) -> StreamingQuery:
    return (df.writeStream.foreachBatch(write).queryName(query_name(ctx.name))
            .option("checkpointLocation", ctx.checkpoint).trigger(processingTime=TRIGGER)
            .start())


def query_name(connector: str) -> str:
    return "connect_" + "".join(c if c.isalnum() else "_" for c in connector)
