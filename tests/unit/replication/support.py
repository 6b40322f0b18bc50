"""Helpers for the replication unit tests: real logs in a temp dir, batches, partitions."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.protocol.records import BatchHeader, Record, build_batch, iter_batches
from odradek.replication.partition import Partition
from odradek.storage.config import LogConfig
from odradek.storage.log import Log

TID = uuid.UUID(int=77)


def now_ms() -> int:
    return int(time.time() * 1000)


def open_log(path: Path, name: str = "t-0", min_isr: int = 1) -> Log:
    return Log.open(path / name, replace(LogConfig(), min_insync_replicas=min_isr))


def batch(n: int = 1, value: bytes = b"v", **kw: Any) -> memoryview:
    return memoryview(build_batch([Record(-1, now_ms(), b"k", value)] * n, **kw))


def leader_partition(log: Log, *, local: int = 1, replicas: list[int] | None = None,
                     isr: list[int] | None = None, epoch: int = 1,
                     alter: list[tuple[int, ...]] | None = None) -> Partition:
    """A partition this node (`local`) leads; proposals to the controller land in `alter`."""
    replicas = replicas or [1, 2, 3]
    isr = isr if isr is not None else list(replicas)
    part = Partition("t", 0, TID, log, leader=-1, leader_epoch=-1, replicas=replicas, isr=isr,
                     local_id=local)
    if alter is not None:
        part.alter_isr = lambda p, new: alter.append(new)
    part.make_leader(epoch, 0, replicas, isr, now_ms())
    return part


def follower_partition(log: Log, *, local: int = 2, leader: int = 1, epoch: int = 1,
                       replicas: list[int] | None = None) -> Partition:
    replicas = replicas or [1, 2, 3]
    part = Partition("t", 0, TID, log, leader=-1, leader_epoch=-1, replicas=replicas,
                     isr=list(replicas), local_id=local)
    part.make_follower(leader, epoch, 0, replicas, list(replicas))
    return part


def append(part: Partition, n: int = 1, **kw: Any) -> Any:
    b = batch(n, **kw)
    return part.append_records_to_leader(b, BatchHeader.parse(b), None)


def read_all(log: Log, start: int = 0) -> bytes:
    out = b""
    offset = start
    while offset < log.log_end_offset:
        res = log.read(offset, 1 << 20)
        if res.region is None:
            break
        data = log.read_bytes(res.region)
        out += data
        last = [h for h, _ in iter_batches(data)][-1]
        offset = last.base_offset + last.last_offset_delta + 1
    return out
