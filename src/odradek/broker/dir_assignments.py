"""Telling the controller which log directory holds each replica (KIP-858, Kafka's
AssignmentsManager), and what a failed directory does in a cluster.

With several log directories the controller cannot know where a replica's log went: a new
replica's directory is UNASSIGNED in the metadata until its broker says. After each
metadata change this node compares, for every partition it hosts, the directory the
metadata records with the one its log is in (a new log; a replica AlterReplicaLogDirs
moved) and sends the differences in AssignReplicasToDirs (73), batched, retried until the
controller has them. With one directory there is nothing to say: the controller records
the broker's only directory at creation (Kafka's defaultDir).

A directory that fails is reported in the next heartbeat (sent at once), so the controller
moves the leaderships of its replicas and takes them out of the ISRs; the node stops
fetching into them at once (replication's `take_dir_offline`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from odradek.broker.entities import build
from odradek.metadata.directories import dir_of
from odradek.metadata.meta_properties import uuid_from_base64
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.messages import request_class

__all__ = ["DirectoryAssignments"]

log = logging.getLogger(__name__)

RETRY_S = 0.5  # after a failed or partly refused AssignReplicasToDirs
MAX_PER_REQUEST = 2000  # replicas in one request (Kafka batches similarly)
# answers after which a replica is not asked about again until the metadata changes
_FINAL = {ErrorCode.none, ErrorCode.unknown_topic_id, ErrorCode.unknown_topic_or_partition,
          ErrorCode.not_leader_or_follower}


class DirectoryAssignments:
    def __init__(self, node_id: int, dir_ids: dict[Path, str], link: Any,
                 broker_epoch: Callable[[], int]) -> None:
        self.node_id = node_id
        self.dirs: dict[Path, uuid.UUID] = {}
        for directory, text in dir_ids.items():
            try:
                self.dirs[directory] = uuid_from_base64(text)
            except ValueError:
                continue
        self._by_real = {p.resolve(): u for p, u in self.dirs.items()}
        self.link = link
        self.broker_epoch = broker_epoch
        # (topic id, partition) -> the directory id to report
        self.pending: dict[tuple[uuid.UUID, int], uuid.UUID] = {}
        self._task: asyncio.Task[None] | None = None
        self.sent = 0  # replicas the controller accepted (status, tests)

    def dir_id(self, directory: Path) -> uuid.UUID | None:
        return self.dirs.get(directory) or self._by_real.get(directory.resolve())

    def reconcile(self, image: Any, rm: Any) -> int:
        """Queue every hosted replica whose directory in `image` is not where its log is.
        On the event loop, after the replica manager followed `image`. Returns how many are
        pending."""
        if len(self.dirs) < 2:
            return 0
        topics = image.topics_by_name
        for (topic, index), part in list(rm.partitions.items()):
            # a log in a failed directory is reported there too: the controller, knowing the
            # directory offline, takes the replica out of the ISR (Kafka does the same)
            lg = part.log
            t = topics.get(topic)
            p = None if t is None else t.partitions.get(index)
            if p is None:
                continue
            actual = self.dir_id(lg.dir.parent)
            if actual is None:
                continue
            if dir_of(p.replicas, p.directories, self.node_id) != actual:
                self.pending[(t.topic_id, index)] = actual
            else:
                self.pending.pop((t.topic_id, index), None)
        if self.pending and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._send_all())
        return len(self.pending)

    async def _send_all(self) -> None:
        while self.pending:
            batch = dict(list(self.pending.items())[:MAX_PER_REQUEST])
            try:
                done = await self._send(batch)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the controller moving, the link down: again later
                log.info("AssignReplicasToDirs failed (%s); retrying", exc)
                done = set()
            for key in done:
                if self.pending.get(key) == batch[key]:
                    del self.pending[key]
            if len(done) < len(batch):
                await asyncio.sleep(RETRY_S)

    async def _send(self, batch: dict[tuple[uuid.UUID, int], uuid.UUID]
                    ) -> set[tuple[uuid.UUID, int]]:
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for (topic_id, index), directory in batch.items():
            by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(index)
        entity = build(request_class(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0), {
            "broker_id": self.node_id, "broker_epoch": self.broker_epoch(),
            "directories": [{"id_": d, "topics": [
                {"topic_id": t, "partitions": [{"partition_index": i} for i in parts]}
                for t, parts in topics.items()]} for d, topics in by_dir.items()]})
        try:
            response = await self.link.request(entity, timeout_s=10.0)
        except KafkaError as exc:
            log.info("AssignReplicasToDirs: %s; retrying", exc.message or exc.code)
            return set()
        code = ErrorCode(int(response.error_code))
        if code != ErrorCode.none:
            log.info("AssignReplicasToDirs refused: %s; retrying", code.name.upper())
            return set()
        done: set[tuple[uuid.UUID, int]] = set()
        for d in response.directories:
            for t in d.topics:
                for p in t.partitions:
                    if ErrorCode(int(p.error_code)) in _FINAL:
                        done.add((t.topic_id or uuid.UUID(int=0), int(p.partition_index)))
        self.sent += len(done)
        return done

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
