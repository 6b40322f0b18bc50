"""`format("odradek")` as a source: batch and streaming readers over offset ranges."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from odradek.spark.consume import LOG, read_range
from odradek.spark.options import OptionError, SourceOptions, parse_source
from odradek.spark.planner import TP, DataLossError, Planner
from odradek.spark.ranges import OffsetRange, split

Offsets = dict[str, dict[str, int]]


def to_json(offsets: Mapping[TP, int]) -> Offsets:
    """Spark's Kafka offset JSON: {"topic": {"0": 12, "1": 40}}."""
    out: Offsets = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


def _ranges(opts: SourceOptions, bounds: Mapping[TP, tuple[int, int]]) -> list[OffsetRange]:
    ranges = [OffsetRange(t, p, s, e, dict(opts.client), opts.include_headers,
                          opts.fail_on_data_loss, opts.poll_timeout_ms, opts.fetch_path)
              for (t, p), (s, e) in sorted(bounds.items())]
    return split(ranges, opts.min_partitions)


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, OffsetRange):
        yield from read_range(partition)


def _lost(opts: SourceOptions, message: str) -> None:
    if opts.fail_on_data_loss:
        raise DataLossError(message + " Set failOnDataLoss=false to continue past it.")
    LOG.warning("%s (continuing: failOnDataLoss=false)", message)


class BatchReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_source(options, streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.opts
        planner = Planner(opts.client)
        tps = planner.partitions(opts.subscription)
        assert opts.ending is not None
        start = planner.resolve(opts.starting, tps, ending=False)
        end = planner.resolve(opts.ending, tps, ending=True)
        earliest = planner.earliest(tps)
        bounds: dict[TP, tuple[int, int]] = {}
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < earliest[tp]:
                _lost(opts, f"data loss on {tp[0]}-{tp[1]}: the requested offset {s} is below "
                            f"the log start offset {earliest[tp]}; those records were deleted.")
                s = earliest[tp]
            if s > e and opts.starting.kind == "offsets" and opts.ending.kind == "offsets":
                raise OptionError(f"option 'startingOffsets' ({s}) is after option 'endingOffsets' "
                                  f"({e}) for {tp[0]}-{tp[1]}")
            bounds[tp] = (s, max(s, e))
        return _ranges(opts, bounds)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = parse_source(options, streaming=True)
        self._planner: Planner | None = None
        self._target: dict[TP, int] | None = None
        # When the last micro-batch was admitted; 0 lets the first one run at once (Spark's).
        self._last_trigger_ms = 0

    @property
    def planner(self) -> Planner:
        # Made on first use: the reader is pickled to Spark's planning process before that.
        if self._planner is None:
            self._planner = Planner(self.opts.client)
        return self._planner

    def initialOffset(self) -> Offsets:
        tps = self.planner.partitions(self.opts.subscription)
        return to_json(self.planner.resolve(self.opts.starting, tps, ending=False))

    def getDefaultReadLimit(self) -> ReadLimit:
        # pyspark has no composite limit: with both bounds Spark is told the maximum and the
        # minimum is applied here from the options (latestOffset).
        opts = self.opts
        if opts.max_offsets_per_trigger:
            return ReadMaxRows(opts.max_offsets_per_trigger)
        if opts.min_offsets_per_trigger:
            return ReadMinRows(opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.partitions(self.opts.subscription)
        self._target = self.planner.latest(tps)

    def _available(self) -> dict[TP, int]:
        if self._target is not None:
            return dict(self._target)
        tps = self.planner.partitions(self.opts.subscription)
        # A partition that is not ready yet is left for the next micro-batch.
        return self.planner.latest(tps, skip_unready=True)

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        begin = from_json(start)
        latest = self._available()
        new = [tp for tp in latest if tp not in begin]
        # Partitions that appeared since the last batch are read from their beginning.
        begin.update(self.planner.earliest(new))
        latest = {tp: off for tp, off in latest.items() if tp in begin}
        # An end below the start (topic recreated) is kept: partitions() reports it as data loss.
        end = dict(latest)
        # ReadAllAvailable wins over the options, as in Spark's Kafka source.
        bounded = not isinstance(limit, ReadAllAvailable)
        if bounded and self._delay(begin, end, limit):
            return dict(start)  # the same offsets: Spark runs no batch
        max_rows = (limit.max_rows if isinstance(limit, ReadMaxRows)
                    else self.opts.max_offsets_per_trigger if bounded else None)
        if max_rows:
            end = cap(begin, end, max_rows)
        # Partitions that vanished keep their last offset so partitions() can report them.
        for tp, off in begin.items():
            end.setdefault(tp, off)
        return to_json(end)

    def _delay(self, begin: Mapping[TP, int], latest: Mapping[TP, int], limit: ReadLimit) -> bool:
        """minOffsetsPerTrigger: skip this trigger while fewer new offsets than the minimum are
        there and maxTriggerDelay has not passed since the last admitted batch.

        Not under Trigger.AvailableNow: it must end, so it reads what is there (pyspark's
        ReadMinRows leaves that case to the source).
        """
        min_rows = (limit.min_rows if isinstance(limit, ReadMinRows)
                    else self.opts.min_offsets_per_trigger)
        if not min_rows or self._target is not None:
            return False
        now = int(time.time() * 1000)
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        new = sum(max(0, off - begin.get(tp, off)) for tp, off in latest.items())
        if new < min_rows:
            return True
        self._last_trigger_ms = now
        return False

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self.planner.earliest(new))
        bounds: dict[TP, tuple[int, int]] = {}
        for tp, e in stop.items():
            s = begin[tp]
            if e < s:
                _lost(self.opts, f"data loss on {tp[0]}-{tp[1]}: its offset went back from {s} to "
                                 f"{e} (the topic was deleted and recreated?).")
                continue
            bounds[tp] = (s, e)
        return _ranges(self.opts, bounds)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: Offsets) -> None:
        # Offsets live in Spark's checkpoint; nothing is committed to a consumer group.
        return None


def cap(begin: Mapping[TP, int], end: Mapping[TP, int], limit: int) -> dict[TP, int]:
    """At most `limit` offsets in total, shared in proportion to each partition's backlog."""
    lag = {tp: max(0, end[tp] - begin[tp]) for tp in end}
    total = sum(lag.values())
    if total <= limit:
        return dict(end)
    take = {tp: (n * limit) // total for tp, n in lag.items()}
    left = limit - sum(take.values())
    # Hand out the rounding remainder to the biggest backlogs so a batch never stays empty.
    for tp in sorted(lag, key=lambda t: (lag[t] - take[t]), reverse=True):
        if left <= 0:
            break
        if take[tp] < lag[tp]:
            take[tp] += 1
            left -= 1
    return {tp: min(end[tp], begin[tp] + take[tp]) for tp in end}
