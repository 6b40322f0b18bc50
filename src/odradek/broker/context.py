"""What handlers see of the node: config, identity, metadata, partitions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.broker.config import Listener
from odradek.replication.manager import ReplicaManager
from odradek.security.authorizer import authorizer_from_config
from odradek.security.quotas import ClientQuotas


@dataclass(slots=True)
class BrokerContext:
    static_config: Any  # metadata.config.broker_configs.BrokerConfig, as started
    node_id: int
    cluster_id: str
    log_dir: Path
    advertised: list[Listener]
    controller: Any  # metadata.controller.Controller
    replica_manager: ReplicaManager
    # api key -> (min, max): what ApiVersions advertises, equal to the registered handlers
    advertised_apis: dict[int, tuple[int, int]] = field(default_factory=dict)
    # serialises metadata changes (CreateTopics, DeleteTopics, configs ...)
    admin_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # coordinator.group.coordinator.GroupCoordinator, set by the node before it listens
    group_coordinator: Any = None
    # coordinator.transaction.coordinator.TransactionCoordinator, set by the node (issue 6)
    transaction_coordinator: Any = None
    # coordinator.share.coordinator.ShareCoordinator, set by the node (issue 20, KIP-932)
    share_coordinator: Any = None
    # issue 14 (a cluster): the listener this context's server serves (Metadata answers with
    # endpoints on it), the metadata quorum (raft handlers), the publisher of the committed
    # image, the broker lifecycle, and the way to the active controller (forwarding)
    listener_name: str | None = None
    quorum: Any = None  # metadata.quorum.Quorum
    publisher: Any = None  # metadata.publisher.MetadataPublisher
    lifecycle: Any = None  # broker.lifecycle.BrokerLifecycle (broker role in a cluster)
    link: Any = None  # broker.forwarding.ControllerLink (a cluster); None: single node
    # broker.schema_validation.SchemaValidation: broker-side schema ID validation (issue 17)
    schema_validation: Any = None
    _config_cache: tuple[Any, Any] | None = None
    # issue 16: security.authorizer.StandardAuthorizer over the image's ACLs, or None (no
    # authorizer.class.name: every request allowed, as Kafka)
    authorizer: Any = None
    # issue 16: client quotas over the image's ClientQuotaRecords (shared by a node's listeners)
    quotas: Any = None

    def __post_init__(self) -> None:
        if self.authorizer is None:
            self.authorizer = authorizer_from_config(self.static_config, lambda: self.image.acls)
        if self.quotas is None:
            cfg = self.static_config
            quotas = self.quotas = ClientQuotas(
                lambda: self.image.client_quotas, int(cfg.get("quota.window.num") or 11),
                int(cfg.get("quota.window.size.seconds") or 1) * 1000)
            publisher = self.publisher or getattr(self.controller, "publisher", None)
            if publisher is not None:
                publisher.add_listener(lambda delta, image: quotas.refresh(image.client_quotas))
                quotas.refresh(publisher.image.client_quotas)

    @property
    def image(self) -> Any:
        if self.publisher is not None:
            return self.publisher.image
        return self.controller.image

    @property
    def config(self) -> Any:
        """The broker config with dynamic overrides, rebuilt only when the image changes."""
        image = self.controller.image
        cached = self._config_cache
        if cached is None or cached[0] is not image:
            cached = self._config_cache = (image, self.controller.broker_config)
        return cached[1]

    @property
    def controller_id(self) -> int:
        """The active controller as clients should see it: its id when it is a live broker;
        else (a controller-only node, which clients cannot reach) a live broker, which
        forwards what a client sends it, as Kafka's KRaft brokers answer."""
        quorum = self.quorum if self.quorum is not None else self.controller.quorum
        leader = quorum.leader_id
        if self.link is None:
            return -1 if leader is None else int(leader)
        brokers = self.image.brokers
        live = sorted(b for b, reg in brokers.items() if not reg.fenced)
        if leader is not None and leader in live:
            return int(leader)
        if self.node_id in live:
            return self.node_id
        return live[0] if live else -1
