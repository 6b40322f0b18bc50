"""A source connector's records on their way out, as Kafka's WorkerSourceTask sends them:
the transforms, then the key and value converters. With `errors.tolerance=all` a record
that fails either is skipped (Kafka has no dead letter queue for sources); with `none` the
task fails.

Sans I/O: `SourceRecords.encode(records)` returns the rows (topic, key, value, headers) the
odradek Spark sink writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from odradek.connect import converters, errant
from odradek.connect.data import ConnectRecord
from odradek.connect.transforms import Chain


class SourceRecords:
    def __init__(self, name: str, config: Mapping[str, str], worker: Mapping[str, str]) -> None:
        self.key = converters.resolve("key.converter", config, worker)
        self.value = converters.resolve("value.converter", config, worker)
        self.chain = Chain.from_config(config)
        self.errors = errant.ErrorReporter(errant.ErrorPolicy.of(config), name)

    def encode(self, records: Iterable[ConnectRecord]) -> list[dict[str, Any]]:
        out = []
        for record in records:
            stage = errant.TRANSFORMATION
            try:
                current = self.chain.apply(record)
                if current is None:
                    continue
                stage = errant.KEY_CONVERTER
                key = self.key.from_connect(current.topic, current.key_schema, current.key)
                stage = errant.VALUE_CONVERTER
                value = self.value.from_connect(current.topic, current.value_schema,
                                                current.value)
            except errant.ToleranceExceeded:
                raise
            except Exception as exc:
                original = errant.Original(record.topic, -1, -1, None, None, record.headers)
                self.errors.failed(original, stage, stage, exc)
                continue
            out.append({"topic": current.topic, "key": key, "value": value,
                        "headers": [{"key": k, "value": v} for k, v in current.headers]})
        return out
