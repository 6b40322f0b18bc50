"""A streaming query run as its own driver process, for the kill -9 tests.

    python -m tests.spark.eos_driver BOOTSTRAP SRC DST CHECKPOINT run|finish

`run` streams SRC -> DST (exactly-once, 150 offsets per micro-batch) until killed; `finish`
runs the same query with Trigger.AvailableNow from the checkpoint and exits.
"""

from __future__ import annotations

import sys

from odradek.spark import session


def main() -> None:
    bootstrap, src, dst, checkpoint, mode = sys.argv[1:6]
    spark = session("local[2]", "odradek-eos-driver", {
        "spark.ui.showConsoleProgress": "false", "spark.driver.memory": "512m",
        "spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("ERROR")
    writer = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", src).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "150").load()
              .select("key", "value")
              .writeStream.format("odradek").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", dst).option("deliveryGuarantee", "exactly-once")
              # Transactions a killed attempt left open expire quickly.
              .option("kafka.transaction.timeout.ms", "10000")
              .option("checkpointLocation", checkpoint))
    if mode == "finish":
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main()
