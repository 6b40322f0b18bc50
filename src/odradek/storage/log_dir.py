"""The layout of a log directory: `<topic>-<partition>` names, the files found in one, and its
`partition.metadata` file (the topic id in Kafka's text form)."""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import re
import uuid
from pathlib import Path

from odradek.storage.checkpoints import atomic_write

__all__ = [
    "FUTURE_SUFFIX",
    "PARTITION_METADATA",
    "decode_topic_id",
    "encode_topic_id",
    "future_dir_name",
    "log_dir_name",
    "parse_future_dir_name",
    "parse_log_dir_name",
    "read_partition_metadata",
    "scan_log_dir",
    "write_partition_metadata",
]

log = logging.getLogger(__name__)

PARTITION_METADATA = "partition.metadata"
_LOG_FILE = re.compile(r"^(\d{20})\.log$")
# (a producer snapshot is named by an offset, not by a segment: never an orphan)
_INDEX_FILE = re.compile(r"^(\d{20})\.(index|timeindex|txnindex)$")
_DIR_NAME = re.compile(r"^(.+)-(\d+)$")
# Kafka 3.x names a replica being moved to another log directory (AlterReplicaLogDirs)
# `<topic>-<partition>.<uuid hex>-future` while it is copied
FUTURE_SUFFIX = "-future"
_FUTURE_NAME = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-future$")
_LEFTOVER_SUFFIXES = (".tmp", ".cleaned", ".swap", ".deleted")


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>` -> (topic, partition); None for anything else."""
    m = _DIR_NAME.match(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def future_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<uuid hex>-future`: where a moving replica is copied to."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>.<hex>-future` -> (topic, partition); None for anything else."""
    m = _FUTURE_NAME.match(name)
    if m is None:
        return None
    return m.group(1), int(m.group(2))


def encode_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a Uuid: base64url of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return uuid.UUID(bytes=raw)



def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id `partition.metadata` holds; None when it is missing or unreadable (the
    caller rewrites it)."""
    path = directory / PARTITION_METADATA
    if not path.exists():
        return None
    try:
        fields = dict(line.split(":", 1) for line in path.read_text().splitlines() if ":" in line)
        return decode_topic_id(fields["topic_id"].strip())
    except (KeyError, ValueError, UnicodeDecodeError) as exc:
        log.warning("%s: unreadable %s (%s); rewriting it", directory, PARTITION_METADATA, exc)
        return None


def write_partition_metadata(directory: Path, topic_id: uuid.UUID, sync: bool = True) -> None:
    body = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}"
    atomic_write(directory / PARTITION_METADATA, body.encode(), sync)


def scan_log_dir(directory: Path) -> tuple[list[int], list[int]]:
    """(base offsets of the `.log` files, sorted; base offsets of index files without a `.log`,
    sorted). Leftovers of an interrupted write, clean or delete are removed on the way."""
    bases: list[int] = []
    index_bases: set[int] = set()
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(_LEFTOVER_SUFFIXES):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
            continue
        m = _LOG_FILE.match(name)
        if m:
            bases.append(int(m.group(1)))
            continue
        m = _INDEX_FILE.match(name)
        if m:
            index_bases.add(int(m.group(1)))
    bases.sort()
    return bases, sorted(index_bases.difference(bases))
