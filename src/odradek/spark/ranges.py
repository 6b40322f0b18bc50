"""Offset ranges: what one Spark task reads, and how big partitions are split."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import pairwise

from pyspark.sql.datasource import InputPartition


@dataclass
class OffsetRange(InputPartition):
    """[start, end) of one topic partition plus everything `read()` needs in the task process.

    Planning and reading run in different processes, so the client settings travel with the
    range instead of living on the reader.
    """

    topic: str
    partition: int
    start: int
    end: int
    client: dict[str, str] = field(default_factory=dict)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    # "native" (our Fetch client, columnar decoding) or "librdkafka" (confluent-kafka).
    fetch_path: str = "native"

    def __post_init__(self) -> None:
        # InputPartition keeps a `value`; ours is the range itself.
        self.value = (self.topic, self.partition, self.start, self.end)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are about `min_partitions` tasks, each sized by its share.

    Same rule as Spark's KafkaOffsetRangeCalculator: a range gets max(1, round(size / total *
    minPartitions)) pieces; nothing is split when there are already enough ranges.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, round(r.size / total * min_partitions)))
        bounds = [r.start + (r.size * i) // pieces for i in range(pieces + 1)]
        out.extend(replace(r, start=a, end=b) for a, b in pairwise(bounds) if b > a)
    return out
