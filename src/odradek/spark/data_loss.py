"""failOnDataLoss inside a task: what to do when a planned offset is no longer readable.

Both read paths (fetch_read.py natively, consume.py through librdkafka) see the broker answer
"offset out of range" and then look up the log's bounds; the decision and its messages live
here once so the two paths cannot drift apart.
"""

from __future__ import annotations

import logging

from odradek.spark.planner import DataLossError
from odradek.spark.ranges import OffsetRange

LOG = logging.getLogger("odradek.spark")


def resume_after_loss(r: OffsetRange, pos: int, log_start: int, log_end: int | None = None) -> int:
    """The offset reading `r` goes on from after a fetch at `pos` was out of range, given the
    log's start (and end, when known) looked up after that answer.

    Raises DataLossError under failOnDataLoss=true; otherwise logs a warning and skips ahead as
    Spark's Kafka source does: to the log start when the records below it were deleted
    (retention, DeleteRecords), to the range's end when `pos` is past the log (the topic was
    recreated smaller). A result >= r.end means nothing of the range is left to read.
    """
    where = f"{r.topic}-{r.partition}"
    if pos < log_start:
        if r.fail_on_data_loss:
            raise DataLossError(
                f"data loss on {where}: offset {pos} is no longer available (log start offset is "
                f"{log_start}); records were deleted by retention or DeleteRecords before they "
                "were read. Set failOnDataLoss=false to continue from the earliest available "
                "offset.")
        LOG.warning("data loss on %s: offsets %d..%d are gone, continuing (failOnDataLoss=false)",
                    where, pos, log_start - 1)
        return min(log_start, r.end)
    # Nothing was deleted below `pos`, so the broker refused it for being past the end: the
    # log is shorter than when the range was planned. Even if it has grown back by the time
    # its end was looked up, those are a new log's records, not the planned ones.
    end = "" if log_end is None else f"log end offset is {log_end}; "
    message = (f"data loss on {where}: offset {pos} is beyond the end of the log ({end}the topic "
               "was deleted and recreated?).")
    if r.fail_on_data_loss:
        raise DataLossError(message + " Set failOnDataLoss=false to continue past it.")
    LOG.warning("%s (continuing: failOnDataLoss=false)", message)
    return r.end
