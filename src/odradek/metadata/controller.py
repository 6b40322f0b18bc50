"""The controller: decides cluster changes and writes them as records to the quorum.

Every operation validates first (nothing is written for a topic or resource that fails), then
appends the records of everything that passed as one batch. The controller never applies its
own records: `quorum.append` returns once the batch is committed and the `MetadataPublisher`
applied it, so `self.image` (the publisher's image) already shows the change. Synchronous and
free of network I/O: the broker calls it in a worker thread, one operation at a time (its lock).

The operations live in mixins, one module per seam:
- controller_topics: CreateTopics, DeleteTopics, CreatePartitions;
- controller_brokers: registration, heartbeats, fencing, controlled shutdown, `tick`;
- controller_elections: AlterPartition, ElectLeaders, offline and preferred elections;
- controller_reassign: Alter/ListPartitionReassignments;
- controller_features: metadata.version, transaction.version, UpdateFeatures.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config_changes import incremental_changes, replacement_changes
from odradek.metadata.controller_acls import AclControl
from odradek.metadata.controller_brokers import BrokerControl
from odradek.metadata.controller_dirs import DirectoryControl
from odradek.metadata.controller_elections import PartitionControl
from odradek.metadata.controller_features import FeatureControl
from odradek.metadata.controller_quotas import QuotaControl
from odradek.metadata.controller_reassign import ReassignmentControl
from odradek.metadata.controller_requests import (
    AlterConfigsResource,
    AlterConfigsResult,
    IncrementalAlterConfigsResource,
)
from odradek.metadata.controller_scram import ScramControl
from odradek.metadata.controller_topics import TopicControl
from odradek.metadata.image import MetadataDelta, MetadataImage
from odradek.metadata.publisher import MetadataPublisher
from odradek.metadata.quorum import Quorum
from odradek.metadata.records import (
    RESOURCE_BROKER,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    ProducerIdsRecord,
)
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["Controller", "load_image"]

log = logging.getLogger(__name__)

Listener = Callable[[MetadataDelta], None]

# how long an operation waits for a just-elected controller to catch up with its own log
ACTIVATION_WAIT_S = 10.0


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _on_event_loop() -> bool:
    """Called on a running event loop (where waiting would stop the loop that delivers)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def load_image(quorum: Quorum, cluster_id: str | None) -> MetadataImage:
    """Replay the committed metadata log into an image."""
    return MetadataPublisher(cluster_id).load(quorum)


class Controller(TopicControl, BrokerControl, PartitionControl, ReassignmentControl,
                 FeatureControl, AclControl, QuotaControl, ScramControl, DirectoryControl):
    def __init__(self, quorum: Quorum, image: MetadataImage | MetadataPublisher,
                 broker_config: BrokerConfig,
                 clock: Callable[[], int] | None = None) -> None:
        """`image` is the node's publisher, or (the single-node path, tests) a loaded image
        from which the controller makes a publisher of its own, following the quorum."""
        self.quorum = quorum
        if isinstance(image, MetadataPublisher):
            self.publisher = image
        else:
            self.publisher = MetadataPublisher(image.cluster_id, image)
            self.publisher.attach(quorum)
        self.static_config = broker_config
        self.node_id = broker_config.node_id
        self._lock = threading.RLock()
        self._rng = random.Random()
        # Sessions, fencing and the rebalance timer run on the monotonic clock, as Kafka's
        # heartbeat manager does: a wall clock stepped by NTP (or skewed) by minutes must
        # not fence every broker at once (docs/reliability.md, finding 9).
        self._clock = clock or monotonic_ms
        self._delta_listeners: dict[Listener, Any] = {}
        BrokerControl.__init__(self)
        PartitionControl.__init__(self)

    # ---------------------------------------------------------------- plumbing

    @property
    def image(self) -> MetadataImage:
        return self.publisher.image

    def add_listener(self, fn: Listener) -> None:
        """fn(delta) after each committed batch (the publisher's listener, without the image)."""
        def adapter(delta: MetadataDelta, image: MetadataImage) -> None:
            fn(delta)
        self._delta_listeners[fn] = adapter
        self.publisher.add_listener(adapter)

    def remove_listener(self, fn: Listener) -> None:
        self.publisher.remove_listener(self._delta_listeners.pop(fn))

    @property
    def broker_config(self) -> BrokerConfig:
        """The static config with this node's dynamic configs from the metadata log on top."""
        image = self.image
        return self.static_config.with_dynamic(
            image.broker_configs(self.node_id), image.broker_configs("")
        )

    def setting(self, name: str, default: Any) -> Any:
        """A broker setting of the cluster-wide controller logic, typed like `default` (some
        of issue 14's keys may not be in the config table of this build yet)."""
        config = self.broker_config
        value = config.get(name)
        if value is None:
            value = config.values.get(name)
        if value is None:
            return default
        if isinstance(default, bool):
            return value if isinstance(value, bool) else str(value).strip().lower() == "true"
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        return value

    @property
    def is_active(self) -> bool:
        """This node is the active controller (the quorum's leader)."""
        return bool(getattr(self.quorum, "is_leader", True))

    def _require_active(self) -> None:
        """NOT_CONTROLLER unless this node is the active controller. A node just elected is
        not active until its commit listeners (the publisher) have heard the log up to the
        start of its term; a worker thread waits for that (up to ACTIVATION_WAIT_S), as
        Kafka's controller only serves once it has replayed what it leads."""
        if self.is_active:
            return
        if (getattr(self.quorum, "leader_id", None) == self.node_id
                and not _on_event_loop()):
            deadline = time.monotonic() + ACTIVATION_WAIT_S
            while time.monotonic() < deadline:
                time.sleep(0.005)
                if self.is_active:
                    return
        raise KafkaError(ErrorCode.not_controller, "This node is not the active controller.")

    def _now(self, now_ms: int | None) -> int:
        return self._clock() if now_ms is None else now_ms

    def _commit(self, records: Sequence[MetadataRecord]) -> MetadataDelta | None:
        """Append as one batch; returns once the publisher shows it. A quorum without commit
        listeners (today's single voter) is published to here, in this thread."""
        if not records:
            return None
        last = self.quorum.append(list(records))
        if self.publisher.offset < last:
            first = last - len(records) + 1
            return self.publisher.on_commit(
                [(first + i, r) for i, r in enumerate(records)])
        return None

    def bootstrap(self, formatted: Sequence[MetadataRecord] = ()) -> None:
        """On becoming the active controller: write the finalized feature levels a new cluster
        needs, the cluster-level min.insync.replicas, and, on the first start, the records the
        data directory was formatted with (`storage format --add-scram`'s credentials) when the
        log holds no bootstrap yet (a later start must not bring back a deleted user)."""
        with self._lock:
            self._require_active()
            first = "metadata.version" not in self.image.features
            extra = [r for r in formatted if not isinstance(r, FeatureLevelRecord)] if first \
                else []
            self._commit(self.bootstrap_feature_records() + extra
                         + self._activation_config_records())

    def _activation_config_records(self) -> list[MetadataRecord]:
        # Kafka 4.1+ (KIP-966) writes the cluster-wide min.insync.replicas as a dynamic
        # default when its controller activates without one, so that every broker and topic
        # reads the same value: describe shows it as DYNAMIC_DEFAULT_BROKER_CONFIG. The value
        # is this controller's static one; once written, AlterConfigs changes it.
        if "min.insync.replicas" in self.image.broker_configs(""):
            return []
        value = str(self.broker_config.get_int("min.insync.replicas"))
        return [ConfigRecord(RESOURCE_BROKER, "", "min.insync.replicas", value)]

    # ---------------------------------------------------------------- producer ids

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1,
                              block_size: int = 1000) -> tuple[int, int]:
        """Reserve the next block of producer ids for a broker (Kafka's AllocateProducerIds):
        the block's end is a ProducerIdsRecord in the metadata log, so ids stay unique across
        restarts. Returns (first id, block size). A broker epoch other than -1 (the local
        coordinator's call) must be the broker's current one: STALE_BROKER_EPOCH."""
        with self._lock:
            self._require_active()
            if broker_epoch != -1:
                self.check_broker_epoch(broker_id, broker_epoch)
            first = int(self.image.next_producer_id)
            self._commit([ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                            next_producer_id=first + block_size)])
            return first, block_size

    # ---------------------------------------------------------------- configs

    def alter_configs(
        self, resources: Sequence[AlterConfigsResource], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        """Legacy AlterConfigs: the given configs replace every override of the resource."""
        return self._alter(
            resources, lambda res: replacement_changes(self.image, self.broker_config, res),
            validate_only,
        )

    def incremental_alter_configs(
        self, resources: Sequence[IncrementalAlterConfigsResource], validate_only: bool = False
    ) -> list[AlterConfigsResult]:
        return self._alter(
            resources, lambda res: incremental_changes(self.image, self.broker_config, res),
            validate_only,
        )

    def _alter(self, resources: Sequence[Any], changes_of: Any,
               validate_only: bool) -> list[AlterConfigsResult]:
        """Each resource validated on its own (a bad one fails alone); what passed is written
        as one batch of ConfigRecords, or not at all with validate_only."""
        with self._lock:
            self._require_active()
            results: list[AlterConfigsResult] = []
            records: list[MetadataRecord] = []
            for res in resources:
                try:
                    changes = changes_of(res)
                except KafkaError as exc:
                    results.append(
                        AlterConfigsResult(res.resource_type, res.resource_name, exc.code, exc.message)
                    )
                    continue
                records += [
                    ConfigRecord(res.resource_type, res.resource_name, k, v)
                    for k, v in changes.items()
                ]
                results.append(AlterConfigsResult(res.resource_type, res.resource_name))
            if not validate_only:
                self._commit(records)
            return results
