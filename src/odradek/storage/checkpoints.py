"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` hold `<topic> <partition> <offset>` entries;
`leader-epoch-checkpoint` holds `<epoch> <start offset>` entries. Writes are
atomic: a temp file is written and fsynced, renamed over the target, and the
directory is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from odradek.storage.log_dir_failure import RateLimitedLog

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

CURRENT_VERSION = 0
# A checkpoint bigger than this is not one of ours; refuse before reading it whole.
_MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024


class CheckpointError(ValueError):
    """A checkpoint file that does not parse (bad version, count or entry)."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, sync: bool = True) -> None:
    """Replace `path` by `data` atomically. On failure the target is untouched and the temp
    file removed (on a full disk it would hold on to the space being asked for). `sync=False`
    skips both fsyncs: the caller makes the file durable later (`fsync_file` and `fsync_dir`)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_file(path: Path) -> None:
    """fsync a file by path (gone: nothing to do)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# Checkpoint writes that keep failing (a full disk) are logged once per kind per interval.
_failures = RateLimitedLog(log)
WRITE_ATTEMPTS = 2


def write_lines(
    path: Path, lines: list[str], version: int = CURRENT_VERSION, sync: bool = True
) -> bool:
    """Write a checkpoint; a failed write is tried again once, then logged (one line, no
    traceback) and given up: the file keeps its older content, which is safe for every
    checkpoint (an older recovery point only means more recovery), and the next periodic
    write tries again. Returns whether the file was written."""
    body = (f"{version}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)).encode()
    error: OSError | None = None
    for _ in range(WRITE_ATTEMPTS):
        try:
            atomic_write(path, body, sync)
            return True
        except OSError as exc:
            error = exc
    _failures.warning(
        f"{path.name}:{getattr(error, 'errno', None)}",
        "writing checkpoint %s failed (%s); it keeps its previous content until a later "
        "write succeeds", path, error,
    )
    return False


def read_lines(path: Path, expected_fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split on whitespace; raises CheckpointError."""
    try:
        if path.stat().st_size > _MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{path}: too large for a checkpoint")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not text") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    try:
        version = int(lines[0].strip())
        count = int(lines[1].strip())
    except ValueError as exc:
        raise CheckpointError(f"{path}: bad version or count line") from exc
    if version != CURRENT_VERSION:
        raise CheckpointError(f"{path}: unsupported checkpoint version {version}")
    entries = [line.split() for line in lines[2:]]
    if count != len(entries):
        raise CheckpointError(f"{path}: count {count} but {len(entries)} entries")
    for fields in entries:
        if len(fields) != expected_fields:
            raise CheckpointError(f"{path}: malformed entry {' '.join(fields)!r}")
    return entries


def write_offsets(path: Path, offsets: Mapping[tuple[str, int], int]) -> bool:
    lines = [
        f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())
    ]
    return write_lines(path, lines)


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """`{(topic, partition): offset}`; an absent file is empty; a malformed one raises."""
    if not path.exists():
        return {}
    result: dict[tuple[str, int], int] = {}
    for topic, partition, offset in read_lines(path, 3):
        try:
            result[(topic, int(partition))] = int(offset)
        except ValueError as exc:
            raise CheckpointError(f"{path}: malformed entry {topic} {partition} {offset}") from exc
    return result
