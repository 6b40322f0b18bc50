"""A SparkSession with the odradek data source registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession


def register(spark: SparkSession) -> SparkSession:
    from odradek.spark.datasource import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
    return spark


def session(master: str = "local[2]", app_name: str = "odradek",
            conf: Mapping[str, str] | None = None) -> SparkSession:
    """A local (or `master`) session whose Python workers run this interpreter."""
    # Workers must import odradek and confluent-kafka, i.e. run the interpreter we run in.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
    }
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return register(builder.getOrCreate())
