"""Who is writing a micro-batch: the stable id a sink uses to recognise a re-executed batch.

A streaming query's id is stored in its checkpoint (`<checkpoint>/metadata`) and stays the
same across restarts, while its run id changes. Spark sets it as the local property
`sql.streaming.queryId` on the thread that calls a `foreachBatch` function, so the function
can find it without being told. A new checkpoint means a new query and a new id: its batch
ids start at 0 again and must not be mistaken for batches already applied.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

QUERY_ID_PROPERTY = "sql.streaming.queryId"


def query_id(df: DataFrame) -> str:
    """The id of the streaming query running this foreachBatch call."""
    found = df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    if not found:
        # Under Spark Connect the function runs in a separate worker without the property.
        raise RuntimeError("no streaming query id on this thread: pass an explicit app_id "
                           "to the writer (it must stay the same across restarts)")
    return found
