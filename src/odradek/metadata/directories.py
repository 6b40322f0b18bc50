"""Which log directory holds each replica (KIP-858, Kafka 3.7+ JBOD in KRaft), as pure rules.

A partition's `directories` list the directory id of each replica in replica order. Kafka
reserves three ids: MIGRATING (0, a broker that never said: taken as online), UNASSIGNED
(1: the broker has several directories and has not said which yet; online) and LOST (2:
offline). Any other id names a directory of the broker's registration, which lists the
directories online now (a BrokerRegistrationChangeRecord shrinks it when one fails).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

__all__ = [
    "LOST_DIR",
    "MIGRATING_DIR",
    "UNASSIGNED_DIR",
    "aligned",
    "dir_of",
    "is_online",
    "with_dir",
]

MIGRATING_DIR = uuid.UUID(int=0)
UNASSIGNED_DIR = uuid.UUID(int=1)
LOST_DIR = uuid.UUID(int=2)


def is_reserved(directory: uuid.UUID) -> bool:
    """Kafka's DirectoryId.reserved: the first 100 ids are never a real directory's."""
    return directory.int < 100


def is_online(directory: uuid.UUID, online: Collection[uuid.UUID]) -> bool:
    """Kafka's DirectoryId.isOnline: `online` are the broker's registered directories (none
    registered: a broker that never said, taken as online)."""
    if directory in (UNASSIGNED_DIR, MIGRATING_DIR):
        return True
    if directory == LOST_DIR:
        return False
    return not online or directory in online


def dir_of(replicas: Sequence[int], directories: Sequence[uuid.UUID], broker_id: int
           ) -> uuid.UUID:
    """The directory of `broker_id`'s replica (UNASSIGNED when none is recorded)."""
    if len(directories) == len(replicas):
        for replica, directory in zip(replicas, directories, strict=True):
            if replica == broker_id:
                return directory
    return UNASSIGNED_DIR


def aligned(old_replicas: Sequence[int], old_dirs: Sequence[uuid.UUID],
            new_replicas: Sequence[int]) -> list[uuid.UUID]:
    """The directories for a new replica list: a replica kept keeps its directory, a new
    one is UNASSIGNED (its broker says where it put it)."""
    known: Mapping[int, uuid.UUID] = (
        dict(zip(old_replicas, old_dirs, strict=True)) if len(old_dirs) == len(old_replicas)
        else {})
    return [known.get(r, UNASSIGNED_DIR) for r in new_replicas]


def with_dir(replicas: Sequence[int], directories: Sequence[uuid.UUID], broker_id: int,
             directory: uuid.UUID) -> list[uuid.UUID]:
    """`directories` with `broker_id`'s replica in `directory`."""
    out = aligned(replicas, directories, replicas)
    return [directory if r == broker_id else d for r, d in zip(replicas, out, strict=True)]
