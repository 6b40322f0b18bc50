"""PySpark source and sink for odradek topics: `spark.read.format("odradek")`.

`register(spark)` adds the data source to a session; `session()` returns a ready local one.
"""

from __future__ import annotations

from odradek.spark.session import register, session

__all__ = ["register", "session"]
