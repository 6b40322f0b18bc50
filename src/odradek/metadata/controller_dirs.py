"""Log directories in the controller (KIP-858, KRaft JBOD; a mixin of `Controller`).

Kafka's ReplicationControlManager.handleAssignReplicasToDirs / handleDirectoriesOffline and
ClusterControlManager.defaultDir, sans-I/O:
- A new replica's directory is the broker's only directory when it registered one, else
  UNASSIGNED (PartitionRecord's `directories`, written by the topic control).
- AssignReplicasToDirs (73): a broker says which directory holds each of its replicas (after
  creating a log, after AlterReplicaLogDirs moved one); each becomes a PartitionChangeRecord
  with the new `directories`. A replica said to be in a directory that is offline also leaves
  the ISR and its leadership (Kafka's "offline-dir-assignment").
- A heartbeat's `offline_log_dirs` naming a directory the registration still lists online:
  that broker's replicas in it leave every ISR and lose their leaderships (never emptying an
  ISR, never electing out of it unless unclean election is on), then a
  BrokerRegistrationChangeRecord lists the directories still online. The broker's other
  directories keep serving.
- A replica whose directory is offline may not lead (Kafka's LeaderAcceptor checks
  hasOnlineDir): `replica_dir_online` is what controller_elections' one leader filter
  (`_leader_acceptable`) asks of every candidate.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from odradek.metadata.directories import (
    MIGRATING_DIR,
    UNASSIGNED_DIR,
    dir_of,
    is_online,
    with_dir,
)
from odradek.metadata.image import MetadataImage, PartitionImage, TopicImage
from odradek.metadata.records import (
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionChangeRecord,
)
from odradek.protocol.errors import ErrorCode

__all__ = ["DirectoryControl"]

log = logging.getLogger(__name__)

# (directory id, topic id, partition) -> the error for that replica's assignment
AssignResults = dict[tuple[uuid.UUID, uuid.UUID, int], ErrorCode]


class DirectoryControl:
    # provided by Controller and the other mixins
    image: MetadataImage
    _lock: Any
    _commit: Any
    _require_active: Any
    _acceptable: Any
    _isr_removal_changes: Any
    check_broker_epoch: Any

    # ---------------------------------------------------------------- placement

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """Kafka's ClusterControlManager.defaultDir: a broker's only directory, UNASSIGNED when
        it has several (it says which), MIGRATING when it registered none."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return UNASSIGNED_DIR
        if not registration.log_dirs:
            return MIGRATING_DIR
        if len(registration.log_dirs) == 1:
            return registration.log_dirs[0]
        return UNASSIGNED_DIR

    def replica_dir_online(self, part: PartitionImage, broker_id: int) -> bool:
        """Is `broker_id`'s replica of `part` in a directory the broker has online."""
        if not part.directories:
            return True
        registration = self.image.brokers.get(broker_id)
        online = registration.log_dirs if registration is not None else ()
        return is_online(dir_of(part.replicas, part.directories, broker_id), online)

    # ---------------------------------------------------------------- AssignReplicasToDirs

    def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int,
        assignments: Mapping[uuid.UUID, Sequence[tuple[uuid.UUID, int]]],
    ) -> AssignResults:
        """AssignReplicasToDirs (73): `assignments` maps a directory id to the (topic id,
        partition) replicas the broker holds in it. The request as a whole fails with
        STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED / NOT_CONTROLLER (raised KafkaError);
        each replica gets its own code (UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION,
        NOT_LEADER_OR_FOLLOWER for a partition the broker is no replica of)."""
        with self._lock:
            self._require_active()
            self.check_broker_epoch(broker_id, broker_epoch)
            online = self.image.brokers[broker_id].log_dirs
            results: AssignResults = {}
            records: list[MetadataRecord] = []
            offline: list[tuple[TopicImage, PartitionImage]] = []
            for directory, replicas in assignments.items():
                for topic_id, index in replicas:
                    code, change = self._assignment(broker_id, directory, topic_id, index)
                    results[(directory, topic_id, index)] = code
                    if change is None:
                        continue
                    topic, part = change
                    new = with_dir(part.replicas, part.directories, broker_id, directory)
                    if tuple(new) != part.directories:
                        # the ISR and leader follow in a second record, computed on the
                        # partition as the image will then have it
                        records.append(self._dirs_record(topic, part, new))
                    if not is_online(directory, online):
                        offline.append((topic, part))
            if records:
                self._commit(records)
            if offline:
                moved = self._leave_isrs(broker_id, self._fresh(offline))
                if moved:
                    self._commit(moved)
                log.warning("broker %d placed %d replicas in offline directories: they left "
                            "their ISRs", broker_id, len(offline))
            return results

    def _assignment(self, broker_id: int, directory: uuid.UUID, topic_id: uuid.UUID,
                    index: int) -> tuple[ErrorCode, tuple[TopicImage, PartitionImage] | None]:
        topic = self.image.topics_by_id.get(topic_id)
        if topic is None:
            log.warning("AssignReplicasToDirs from broker %d names unknown topic id %s",
                        broker_id, topic_id)
            return ErrorCode.unknown_topic_id, None
        part = topic.partitions.get(index)
        if part is None:
            return ErrorCode.unknown_topic_or_partition, None
        if broker_id not in part.replicas:
            return ErrorCode.not_leader_or_follower, None
        return ErrorCode.none, (topic, part)

    @staticmethod
    def _dirs_record(topic: TopicImage, part: PartitionImage, dirs: list[uuid.UUID]
                     ) -> MetadataRecord:
        return PartitionChangeRecord(part.partition, topic.topic_id, directories=dirs)

    def _fresh(self, pairs: Iterable[tuple[TopicImage, PartitionImage]]
               ) -> list[tuple[TopicImage, PartitionImage]]:
        """The same partitions as the image has them now (after a commit)."""
        out = []
        for topic, part in pairs:
            now = self.image.topics_by_id.get(topic.topic_id)
            if now is not None and part.partition in now.partitions:
                out.append((now, now.partitions[part.partition]))
        return out

    def _leave_isrs(self, broker_id: int,
                    pairs: Iterable[tuple[TopicImage, PartitionImage]]) -> list[MetadataRecord]:
        """`broker_id` leaves these partitions' ISRs and leaderships; it stays registered and
        unfenced, so it is taken as fenced for them (the registration may still list the
        directory online while this batch is built)."""
        return self._isr_removal_changes(broker_id, self._acceptable(fenced=[broker_id]),
                                         pairs)

    # ---------------------------------------------------------------- offline directories

    def directories_offline(self, broker_id: int, broker_epoch: int,
                            offline_dirs: Sequence[uuid.UUID]) -> int:
        """A heartbeat's OfflineLogDirs (Kafka's handleDirectoriesOffline): for directories the
        registration still lists online, the broker's replicas in them leave their ISRs and
        leaderships, and the registration keeps only the directories still online. Called
        under the controller's lock by the heartbeat; returns the partitions changed."""
        if not offline_dirs:
            return 0
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return 0
        gone = [d for d in registration.log_dirs if d in offline_dirs]
        if not gone:
            return 0
        lost = set(gone)
        pairs = [(topic, part) for topic in self.image.topics_by_id.values()
                 for part in topic.partitions.values()
                 if broker_id in part.replicas
                 and dir_of(part.replicas, part.directories, broker_id) in lost]
        records = self._leave_isrs(broker_id, pairs)
        still = [d for d in registration.log_dirs if d not in lost]
        records.append(BrokerRegistrationChangeRecord(broker_id, broker_epoch, log_dirs=still))
        self._commit(records)
        log.warning("log directories %s of broker %d are offline: %d partitions changed "
                    "(ISR, leader); its directories still online: %s",
                    [str(d) for d in gone], broker_id, len(records) - 1,
                    [str(d) for d in still])
        return len(records) - 1
