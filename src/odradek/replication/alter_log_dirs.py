"""Replicas moving between this node's log directories (AlterReplicaLogDirs), as Kafka's
ReplicaAlterLogDirsManager/Thread: the I/O around storage.log_move's decisions.

A move copies the current log into a `-future` log in the destination directory on a
worker thread, a chunk at a time, while the partition goes on taking appends and serving
reads on the event loop. Once the copy is close to the log end the last chunks are copied
on the loop itself, where no append can land in between, and the logs are swapped there
(LogManager.swap_future); the partition then reads and appends the new log. A failure
(either directory going offline, the partition leaving this node) drops the future log
and leaves the current one as it was.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.protocol.records import validate_batches
from odradek.storage.log import OffsetOutOfRange
from odradek.storage.log_move import (
    UNLIMITED,
    Copy,
    IoThrottle,
    LogMove,
    MoveState,
    RestartAt,
    Step,
    Swap,
    TruncateFuture,
)

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
# chunks a worker-thread turn copies before it looks again; and chunks the loop copies
# (blocking appends meanwhile) before it gives the rest back to the thread
THREAD_STEPS = 64
LOOP_STEPS = 4
SWAP_RETRY_S = 0.01


class MoveAborted(Exception):
    """The move cannot go on (its copy was dropped, or does not line up)."""


class ReplicaAlterLogDirsManager:
    def __init__(self, replica_manager: Any) -> None:
        self.rm = replica_manager
        self.moves: dict[tuple[str, int], LogMove] = {}
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}
        # replica.alter.log.dirs.io.max.bytes.per.second, read at every chunk (dynamic);
        # the node sets it from its config
        self.rate: Callable[[], int] = lambda: UNLIMITED
        # called with (topic, partition) once a replica is in its new directory: the node
        # tells the controller (AssignReplicasToDirs, KIP-858)
        self.on_moved: Callable[[str, int], None] = lambda topic, partition: None
        self._throttle = IoThrottle()
        self._throttle_lock = threading.Lock()

    @property
    def log_manager(self) -> Any:
        return self.rm.log_manager

    def start(self, part: Any, destination: Path) -> None:
        """Begin (or redirect) the move of `part`'s log to `destination`; on the loop.
        Raises KafkaError (KAFKA_STORAGE_ERROR, REPLICA_NOT_AVAILABLE) when it cannot."""
        key = (part.topic, part.index)
        lm = self.log_manager
        running = self.moves.get(key)
        if running is not None and running.state is MoveState.COPYING:
            if running.destination == destination:
                return
            self.cancel(key)
        lm.create_future(part.topic, part.index, destination)
        self._run(part, LogMove(part.topic, part.index, lm.dir_of(part.log), destination))

    def resume(self) -> None:
        """After a restart: go on with the moves whose `-future` logs were found."""
        for key, future in self.log_manager.futures.items():
            part = self.rm.partitions.get(key)
            if part is None or key in self._tasks:
                continue
            self._run(part, LogMove(key[0], key[1], self.log_manager.dir_of(part.log),
                                    future.dir.parent))

    def _run(self, part: Any, move: LogMove) -> None:
        key = (part.topic, part.index)
        self.moves[key] = move
        task = asyncio.ensure_future(self._move(part, move))
        self._tasks[key] = task
        task.add_done_callback(lambda t, k=key: self._tasks.pop(k, None)
                               if self._tasks.get(k) is t else None)
        log.info("moving %s-%d from %s to %s", part.topic, part.index, move.source,
                 move.destination)

    def cancel(self, key: tuple[str, int]) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()
        move = self.moves.get(key)
        if move is not None and move.state is MoveState.COPYING:
            move.failed("cancelled")
        self.log_manager.abort_future(*key)

    async def stop(self) -> None:
        """At shutdown: stop copying; the `-future` logs stay and the moves resume at the
        next start, as in Kafka."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass

    async def _move(self, part: Any, move: LogMove) -> None:
        key = (part.topic, part.index)
        try:
            while True:
                if self.rm.partitions.get(key) is not part:
                    break
                step, pause = await asyncio.to_thread(self._advance, part, move, THREAD_STEPS,
                                                      True)
                if pause > 0:
                    await asyncio.sleep(pause)  # the io quota (cancellable, unlike a thread)
                    continue
                if isinstance(step, Swap):
                    # on the loop from here: nothing appends until the swap is done
                    if self.rm.partitions.get(key) is not part:
                        break
                    if isinstance(self._advance(part, move, LOOP_STEPS)[0], Swap):
                        new = self.log_manager.swap_future(part.topic, part.index,
                                                           blocking=False)
                        if new is not None:
                            part.log = new
                            move.done()
                            self.on_moved(part.topic, part.index)
                            return
                        await asyncio.sleep(SWAP_RETRY_S)  # a checkpoint holds the manager
                        continue
                await asyncio.sleep(0)
            move.failed("the partition left this node")
            self.log_manager.abort_future(*key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = str(exc) or type(exc).__name__
            if self.rm.partitions.get(key) is not part:
                reason = "the partition left this node"
            log.warning("move of %s-%d to %s failed: %s; the log stays in %s", part.topic,
                        part.index, move.destination, reason, move.source)
            move.failed(reason)
            try:
                self.log_manager.abort_future(*key)
            except OSError as exc2:
                log.warning("removing the copy of %s-%d failed: %s", part.topic, part.index,
                            exc2)

    def _advance(self, part: Any, move: LogMove, max_steps: int,
                 throttled: bool = False) -> tuple[Step, float]:
        """Up to `max_steps` steps of the move; returns the last step (Swap: caught up) and
        how long the io quota asks to pause (`throttled`: the worker thread's turns; the
        loop's last few chunks before a swap are not held back)."""
        lm = self.log_manager
        key = (part.topic, part.index)
        step: Step = Copy(0)
        rate = self.rate() if throttled else UNLIMITED
        for _ in range(max_steps):
            current = part.log
            future = lm.futures.get(key)
            if future is None:
                raise MoveAborted("its future log was dropped")
            step = move.next_step(current.log_start_offset, current.log_end_offset,
                                  future.log_start_offset, future.log_end_offset,
                                  current.take_truncation())
            if isinstance(step, Swap):
                if throttled:
                    # here on the worker thread, the fsyncs of what was copied; the swap on
                    # the loop then flushes only the last few chunks
                    future.flush()
                return step, 0.0
            if isinstance(step, TruncateFuture):
                future.truncate_to(step.offset)
            elif isinstance(step, RestartAt):
                restart_move(current, future, move, step.offset)
            else:
                if rate <= 0:
                    with self._throttle_lock:
                        return step, self._throttle.delay(time.monotonic(), 0, rate)
                copied = copy_chunk(current, future, step.offset, min(CHUNK_BYTES, rate))
                if rate < UNLIMITED:
                    with self._throttle_lock:
                        pause = self._throttle.delay(time.monotonic(), copied, rate)
                    if pause > 0:
                        return step, pause
        return step, 0.0


def restart_move(current: Any, future: Any, move: LogMove, offset: int) -> None:
    """Empty the future log and start it at the first batch holding `offset` (a log start
    moved by DeleteRecords may be inside a batch)."""
    try:
        read = current.read(offset, 1, min_one_batch=True)
    except OffsetOutOfRange:
        return  # the start moved again: the next step sees where
    base = offset
    if read.region is not None:
        head = validate_batches(current.read_bytes(read.region), check_crc=False,
                                from_client=False)
        if head:
            base = head[0].base_offset
    future.truncate_fully_and_start_at(base)
    move.restarted(base, offset)


def copy_chunk(current: Any, future: Any, offset: int, max_bytes: int = CHUNK_BYTES) -> int:
    """Copy whole batches of `current` from `offset` (the future's end) into `future`, as
    they are (at most `max_bytes` but at least one batch). Returns the bytes copied."""
    start = max(offset, current.log_start_offset)
    try:
        read = current.read(start, max_bytes, min_one_batch=True)
    except OffsetOutOfRange:
        return 0  # retention moved the start: the next step restarts the copy
    if read.region is None:
        return 0
    data = memoryview(current.read_bytes(read.region))
    leo = future.log_end_offset
    todo = []
    pos = 0
    for h in validate_batches(data, check_crc=True, from_client=False):
        size = h.batch_length + 12
        if h.base_offset + h.last_offset_delta >= leo:
            todo.append((data[pos:pos + size], h))
        pos += size
    if not todo:
        return 0
    if todo[0][1].base_offset < leo:
        raise MoveAborted(f"a batch at {todo[0][1].base_offset} straddles the copy's end {leo}")
    future.append_many(todo, assign_offsets=False)
    return sum(len(b) for b, _ in todo)
