"""A Spark streaming source over one growing text file: the lines after a byte position.

Offsets are Kafka's FileStreamSource offsets, `{"position": <byte after the last line read>}`,
so the query's end offset is exactly what connect-offsets keeps. Only whole lines are read
(a line still being written, with no newline yet, waits for the next micro-batch), at most
`batch.size` lines per micro-batch. `\\n` and `\\r\\n` both end a line, as in Kafka's task.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

SCHEMA = "line string, position long"


def read_lines(path: str, start: int, limit: int,
               until: int | None = None) -> tuple[list[tuple[str, int]], int]:
    """Up to `limit` whole lines from byte `start` (and not past byte `until`):
    [(line, position after it)], and the new position."""
    if not os.path.exists(path):
        return [], start
    out: list[tuple[str, int]] = []
    pos = start
    with open(path, "rb") as fh:
        fh.seek(start)
        while len(out) < limit and (until is None or pos < until):
            raw = fh.readline()
            if not raw.endswith(b"\n"):
                break  # end of file, or a line not finished yet
            pos += len(raw)
            text = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            out.append((text.decode("utf-8", errors="replace"), pos))
    return out, pos


class FileLinesReader(SimpleDataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.path = options["file"]
        self.start = int(options.get("position", "0"))
        self.limit = int(options.get("batch.size", "2000"))

    def initialOffset(self) -> dict[str, int]:
        return {"position": self.start}

    def read(self, start: dict[str, int]) -> tuple[Iterator[tuple[str, int]], dict[str, int]]:
        lines, pos = read_lines(self.path, int(start["position"]), self.limit)
        return iter(lines), {"position": pos}

    def readBetweenOffsets(self, start: dict[str, int],
                           end: dict[str, int]) -> Iterator[tuple[str, int]]:
        # A re-run of a planned batch: the same bytes again (the file only grows).
        lines, _ = read_lines(self.path, int(start["position"]), 1 << 62, int(end["position"]))
        return iter(lines)

    def commit(self, end: dict[str, int]) -> None:
        return None


class FileLinesSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "odradek_connect_file"

    def schema(self) -> str:
        return SCHEMA

    def simpleStreamReader(self, schema: StructType) -> FileLinesReader:
        return FileLinesReader(dict(self.options))
