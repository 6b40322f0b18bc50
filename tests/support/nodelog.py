"""Read what a node wrote to its log since a mark, to check that bad input was logged."""

from __future__ import annotations

import time
from pathlib import Path


class NodeLog:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def mark(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def since(self, mark: int) -> str:
        with open(self.path, "rb") as f:
            f.seek(mark)
            return f.read().decode(errors="replace")

    def wait_for(self, mark: int, needles: list[str], timeout: float = 5.0) -> list[str]:
        """The new lines that mention any of needles (case-insensitive); waits for one to appear."""
        lowered = [n.lower() for n in needles]
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.since(mark).splitlines()
                     if any(n in line.lower() for n in lowered)]
            if lines or time.monotonic() >= deadline:
                return lines
            time.sleep(0.05)
