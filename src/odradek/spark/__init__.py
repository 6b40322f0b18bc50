"""PySpark source and sink for odradek topics: `spark.read.format("odradek")`.
`register(spark)` (from `session`) adds the data source to a session; `session()` returns a
ready local one. `datasource.OdradekDataSource` is the one name; `source` (BatchReader,
StreamReader) plans offset ranges with `planner` and `ranges`, and tasks read them with
`fetch_read` (native Fetch into Arrow) or `consume` (confluent-kafka); `sink` writes rows,
optionally in transactions; `options` checks both; `serde` and `avro` parse values; `pipeline`."""

from __future__ import annotations

from odradek.spark.session import register, session

__all__ = ["register", "session"]
