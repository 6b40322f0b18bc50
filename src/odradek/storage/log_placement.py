"""Which log directory a new replica goes to (JBOD, `log.dirs` with several directories).

As Kafka's LogManager.nextLogDirs: a directory an operator asked for beforehand
(AlterReplicaLogDirs for a partition not yet hosted) when it is online, else the online
directory holding the fewest logs (future logs of moves in progress count), ties going to
the directory listed first. Sans-I/O: the caller counts the logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["NoOnlineLogDir", "choose_log_dir"]


class NoOnlineLogDir(Exception):
    """Every log directory is offline: no new replica can be placed."""


def choose_log_dir(
    dirs: Sequence[Path],
    counts: Mapping[Path, int],
    offline: frozenset[Path] | set[Path] = frozenset(),
    preferred: Path | None = None,
) -> Path:
    """The directory of `dirs` (in their configured order) a new log goes to. `counts`: the
    logs each directory holds; `offline`: directories that take no new logs."""
    online = [d for d in dirs if d not in offline]
    if not online:
        raise NoOnlineLogDir(f"no log directory is online ({', '.join(map(str, dirs))})")
    if preferred is not None and preferred in online:
        return preferred
    # min() keeps the first of equals: ties go to the directory listed first
    return min(online, key=lambda d: counts.get(d, 0))
