"""Types of the C extension _record.c: the request metrics' per-request recording."""

from collections.abc import Callable
from typing import Any

BUCKETS_MS: tuple[float, ...]
MAX_KEY: int
VERSIONS: int

class Table:
    """One node's request counts and time sums; `slow(header, queue, local, total)` is
    called for a request whose total passes `slow_s` seconds."""

    slow_s: float
    def __new__(cls, slow_s: float, slow: Callable[[Any, float, float, float], object]
                ) -> Table: ...
    def record(self, header: tuple[Any, ...], received: float, started: float,
               handled: float, done: float) -> None: ...
    def count(self, key: int, version: int) -> None: ...
    def row(self, key: int) -> list[Any]: ...
    def versions(self, key: int) -> dict[int, int]: ...

class Timer:
    """One connection's request timing into a Table; `now` (perf_counter seconds) for
    tests, the clock's time without it."""

    received: float
    last_done: float
    def __new__(cls, table: Table) -> Timer: ...
    def mark_read(self, now: float = ...) -> None: ...
    def record(self, header: tuple[Any, ...], now: float = ...) -> None: ...
    def handled(self, now: float = ...) -> tuple[float, float, float]: ...
