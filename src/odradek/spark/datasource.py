"""The `odradek` data source: one name for the source and the sink."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from odradek.spark.options import (
    client_settings,
    flag,
    lower_keys,
    parse_sink,
    parse_starting,
    parse_subscription,
)
from odradek.spark.schema import source_schema
from odradek.spark.sink import BatchWriter, StreamWriter, check_columns
from odradek.spark.source import BatchReader, StreamReader

EXACTLY_ONCE = True


class OdradekDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek"

    def schema(self) -> StructType:
        # Spark asks for the schema when the DataFrame is defined, so the options both readers
        # share are checked here and a bad one fails at load(), not in a task.
        opts = lower_keys(self.options)
        client_settings(opts)
        parse_subscription(opts)
        parse_starting(opts, "earliest")
        return source_schema(flag(opts, "includeHeaders", False))

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts = parse_sink(self.options, exactly_once_available=EXACTLY_ONCE)
        check_columns(schema, opts)
        return BatchWriter(opts)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        opts = parse_sink(self.options, exactly_once_available=EXACTLY_ONCE)
        check_columns(schema, opts)
        return StreamWriter(opts)
