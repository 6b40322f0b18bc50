"""What the admin HTTP and the metrics read of a running node, filled in as it starts.

A node starts in steps (quorum, controller, logs, broker, coordinators, listeners); the
admin HTTP serves from the first step on, so each part is None until it exists and every
reader copes with that (`/health/ready` says what is still missing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class NodeView:
    node_id: int
    roles: tuple[str, ...]  # "broker", "controller"
    cluster_id: str | None = None
    quorum: Any = None  # metadata.raft.kraft.KRaftQuorum
    controller: Any = None  # metadata.controller.Controller of this node's controller role
    ctx: Any = None  # broker.context.BrokerContext of the broker role, once it serves
    log_manager: Any = None  # storage.log_manager.LogManager
    lifecycle: Any = None  # broker.lifecycle.BrokerLifecycle (a broker in a cluster)
    servers: list[Any] = field(default_factory=list)  # broker.server.Server, every listener
    requests: Any = None  # broker.metrics.requests.RequestStats (None: not measured)
    started: bool = False
    stopping: bool = False

    @property
    def image(self) -> Any:
        if self.ctx is not None:
            return self.ctx.image
        if self.controller is not None:
            return self.controller.image
        return None

    @property
    def replica_manager(self) -> Any:
        return None if self.ctx is None else self.ctx.replica_manager

    @property
    def group_coordinator(self) -> Any:
        return None if self.ctx is None else self.ctx.group_coordinator
