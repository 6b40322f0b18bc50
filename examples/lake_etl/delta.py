"""Append micro-batches to a Delta table with the `deltalake` package, each batch exactly once.

Why Delta's transaction ids: every commit the writer makes carries a `txn` action
(app id = the streaming query's id, version = the batch id) in the same atomic commit as
the data files, which is how Spark's own Delta sink does it. Before writing, the writer reads
the table's latest version for its app id (`DeltaTable.transaction_version`); a batch at or
below it was already committed, so a re-executed batch (the driver died after the Delta commit
and before Spark recorded the batch as done) is skipped. No marker lives outside the table:
the check and the data cannot disagree, and any Delta reader sees the same `txn` state.
An extra `custom_metadata` entry names the batch in the commit info for people reading the log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import DataFrame

from examples.batch_identity import query_id


@dataclass
class DeltaBatchWriter:
    """A `foreachBatch` function: `writeStream.foreachBatch(DeltaBatchWriter(uri))`.

    `app_id` defaults to the streaming query's id, stable across restarts of one checkpoint.
    `calls`, `written` and `skipped` record batch ids, for tests and logs: in classic PySpark
    foreachBatch runs in the driver's Python process, so they are visible to the caller.
    """

    table_uri: str
    partition_by: Sequence[str] = ()
    app_id: str | None = None
    storage_options: dict[str, str] | None = None
    calls: list[int] = field(default_factory=list)
    written: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        self.calls.append(batch_id)
        app = self.app_id or f"odradek-lake-etl-{query_id(df)}"
        done = self.last_version(app)
        if done is not None and batch_id <= done:
            self.skipped.append(batch_id)
            return
        data = df.toArrow()
        if data.num_rows == 0:
            # An empty commit would only add a table version; the next batch's txn moves past it.
            return
        write_deltalake(
            self.table_uri, data, mode="append", partition_by=list(self.partition_by) or None,
            storage_options=self.storage_options,
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app, batch_id)],
                custom_metadata={"odradek.app_id": app, "odradek.batch_id": str(batch_id)},
            ),
        )
        self.written.append(batch_id)

    def last_version(self, app: str) -> int | None:
        try:
            table = DeltaTable(self.table_uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        return table.transaction_version(app)
