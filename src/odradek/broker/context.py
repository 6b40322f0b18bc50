"""What handlers see of the node: config, identity, metadata, partitions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from odradek.broker.config import Listener
from odradek.replication.manager import ReplicaManager


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
    _config_cache: tuple[Any, Any] | None = None

    @property
    def image(self) -> Any:
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
        return int(self.controller.quorum.leader_id)
