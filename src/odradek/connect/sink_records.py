"""A sink connector's records, as Kafka's WorkerSinkTask makes them from what it consumed:
the key and value through their converters, then the transforms, each record's failure
handled by `errant` (skipped and dead-lettered, or the task fails).

Sans I/O apart from the reporter's DLQ producer: `SinkRecords.convert(rows)` takes the rows
of a micro-batch (topic, partition, offset, timestamp, key, value, headers, as the odradek
source gives them) and returns the ConnectRecords the connector writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.connect import converters, errant
from odradek.connect.cluster import Cluster
from odradek.connect.data import ConnectRecord
from odradek.connect.transforms import Chain


def millis(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return converters.epoch_millis(value)
    return int(value)


class SinkRecords:
    def __init__(self, name: str, config: Mapping[str, str], worker: Mapping[str, str],
                 cluster: Cluster | None = None) -> None:
        self.key_class, _ = converters.settings_of("key.converter", config, worker)
        self.value_class, _ = converters.settings_of("value.converter", config, worker)
        self.key = converters.resolve("key.converter", config, worker)
        self.value = converters.resolve("value.converter", config, worker)
        self.chain = Chain.from_config(config)
        self.errors = errant.ErrorReporter(errant.ErrorPolicy.of(config), name, cluster)

    def convert(self, rows: Iterable[Mapping[str, Any]]) -> list[ConnectRecord]:
        out = []
        for row in rows:
            headers = tuple((h["key"], h["value"]) for h in row.get("headers") or ())
            original = errant.Original(row["topic"], int(row["partition"]), int(row["offset"]),
                                       row.get("key"), row.get("value"), headers)
            record = self.one(original, millis(row.get("timestamp")))
            if record is not None:
                out.append(record)
        self.errors.flush()
        return out

    def one(self, original: errant.Original, timestamp: int | None) -> ConnectRecord | None:
        stage, executing = errant.KEY_CONVERTER, self.key_class
        try:
            key_schema, key = self.key.to_connect(original.topic, original.key)
            stage, executing = errant.VALUE_CONVERTER, self.value_class
            value_schema, value = self.value.to_connect(original.topic, original.value)
            record = ConnectRecord(original.topic, original.partition, key_schema, key,
                                   value_schema, value, timestamp, original.headers,
                                   original.offset)
            stage = errant.TRANSFORMATION
            current: ConnectRecord | None = record
            for step in self.chain.steps:
                executing = step.type_name
                assert current is not None
                current = step.apply(current)
                if current is None:
                    return None
            return current
        except errant.ToleranceExceeded:
            raise
        except Exception as exc:
            self.errors.failed(original, stage, executing, exc)
            return None
