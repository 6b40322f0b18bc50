"""A broker's life with the active controller (Kafka's BrokerLifecycleManager).

Registration: BrokerRegistration to the active controller (over the controller listener)
until it answers with a broker epoch; the broker starts fenced. Heartbeats: BrokerHeartbeat
every `broker.heartbeat.interval.ms` carrying the offset of the metadata this broker has
applied; once that reaches its registration the controller unfences it, and `unfenced` is
set (the node serves clients from then on). A controller that stops hearing heartbeats for
`broker.session.timeout.ms` fences the broker. Controlled shutdown (SIGTERM): heartbeats ask
want_shut_down until the controller answers should_shut_down, i.e. until this broker leads no
partition any more, so that producers meet only retriable errors while leadership moves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.broker.entities import build
from odradek.network.channel import ChannelError, Channels
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class

__all__ = ["BrokerLifecycle", "LifecycleSettings"]

log = logging.getLogger(__name__)

REGISTRATION_VERSION = 4
HEARTBEAT_VERSION = 1
_RETRY_S = 0.1  # after a refused or failed registration (Kafka backs off exponentially)
_SHUTDOWN_POLL_S = 0.1  # heartbeats while waiting for should_shut_down
NO_CONTROLLER_GIVE_UP_S = 3.0  # a controlled shutdown with no controller answering ends


@dataclass(slots=True)
class LifecycleSettings:
    node_id: int
    cluster_id: str
    listeners: list[tuple[str, str, int, int]]  # name, host, port, security protocol id
    features: list[tuple[str, int, int]]  # name, min, max supported
    rack: str | None = None
    heartbeat_interval_ms: int = 2000
    request_timeout_s: float = 5.0
    incarnation_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # the log directories' ids (registration), and those offline now (every heartbeat):
    # Kafka 3.7+'s JBOD reporting
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    offline_log_dirs: Callable[[], list[uuid.UUID]] = field(default=lambda: [])
    # KIP-966: the broker epoch of the last clean shutdown (storage.clean_shutdown), -1 after
    # an unclean one: the controller then takes this broker out of every ISR
    previous_broker_epoch: int = -1


class BrokerLifecycle:
    def __init__(self, settings: LifecycleSettings, channels: Channels,
                 leader_id: Callable[[], int | None], voters: list[int],
                 metadata_offset: Callable[[], int]) -> None:
        self.settings = settings
        self.channels = channels
        self.leader_id = leader_id
        self.voters = sorted(voters)
        self.metadata_offset = metadata_offset
        self.broker_epoch = -1
        self.fenced = True
        self.caught_up = False
        self.registered = asyncio.Event()
        self.unfenced = asyncio.Event()
        self.shut_down_allowed = asyncio.Event()
        self.want_shut_down = False
        # until the node has loaded its logs it asks to stay fenced (Kafka's want_fence while
        # not ready to unfence): it must not lead partitions it cannot serve yet
        self.ready_to_unfence = False
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._next_voter = 0

    # ---------------------------------------------------------------- control

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask to shut down; True once the controller allowed it (leadership moved away)."""
        if not self.registered.is_set():
            return True
        self.want_shut_down = True
        self._wake.set()
        deadline = time.monotonic() + timeout_s
        unheard_since: float | None = None
        while not self.shut_down_allowed.is_set():
            now = time.monotonic()
            # no controller answers (the quorum is going down with us): nobody can move the
            # leaderships, so waiting longer only delays the stop
            if self.last_error is None:
                unheard_since = None
            elif unheard_since is None:
                unheard_since = now
            if unheard_since is not None and now - unheard_since >= NO_CONTROLLER_GIVE_UP_S:
                log.warning("controlled shutdown: no active controller answers; stopping")
                return False
            if now >= deadline:
                log.warning("controlled shutdown not confirmed by the controller within "
                            "%.0f s; stopping anyway", timeout_s)
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.shut_down_allowed.wait(), 0.1)
        return True

    # ---------------------------------------------------------------- the loop

    def _target(self) -> int:
        leader = self.leader_id()
        if leader is not None and leader >= 0:
            return int(leader)
        # no leader known yet: try the voters in turn (one of them will say who leads)
        self._next_voter = (self._next_voter + 1) % max(1, len(self.voters))
        return self.voters[self._next_voter] if self.voters else self.settings.node_id

    async def _run(self) -> None:
        while True:
            try:
                if self.broker_epoch < 0:
                    await self._register()
                    continue
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("broker lifecycle step failed")
                await asyncio.sleep(_RETRY_S)

    async def _register(self) -> None:
        s = self.settings
        entity = build(request_class(ApiKey.BROKER_REGISTRATION, REGISTRATION_VERSION), {
            "broker_id": s.node_id, "cluster_id": s.cluster_id,
            "incarnation_id": s.incarnation_id,
            "listeners": [{"name": n, "host": h, "port": p, "security_protocol": sp}
                          for n, h, p, sp in s.listeners],
            "features": [{"name": n, "min_supported_version": lo, "max_supported_version": hi}
                         for n, lo, hi in s.features],
            "rack": s.rack, "is_migrating_zk_broker": False,
            "log_dirs": tuple(s.log_dirs),
            "previous_broker_epoch": s.previous_broker_epoch})
        target = self._target()
        try:
            response = await self.channels.request(target, entity, s.request_timeout_s)
        except ChannelError as exc:
            self._note(f"registration with controller {target} failed: {exc}")
            await asyncio.sleep(_RETRY_S)
            return
        code = ErrorCode(int(response.error_code))
        if code != ErrorCode.none:
            self._note(f"registration refused by controller {target}: {code.name.upper()}")
            if code in (ErrorCode.inconsistent_cluster_id,):
                log.error("broker %d belongs to another cluster than controller %d "
                          "(INCONSISTENT_CLUSTER_ID); it keeps trying", s.node_id, target)
            await asyncio.sleep(_RETRY_S if code == ErrorCode.not_controller else 1.0)
            return
        self.broker_epoch = int(response.broker_epoch)
        self.last_error = None
        log.info("registered with controller %d: broker epoch %d (fenced until caught up)",
                 target, self.broker_epoch)
        self.registered.set()

    async def _heartbeat(self) -> None:
        s = self.settings
        entity = build(request_class(ApiKey.BROKER_HEARTBEAT, HEARTBEAT_VERSION), {
            "broker_id": s.node_id, "broker_epoch": self.broker_epoch,
            "current_metadata_offset": max(-1, int(self.metadata_offset())),
            "want_fence": not self.ready_to_unfence and not self.want_shut_down,
            "want_shut_down": self.want_shut_down,
            "offline_log_dirs": tuple(s.offline_log_dirs())})
        target = self._target()
        began = time.monotonic()
        try:
            response = await self.channels.request(target, entity, s.request_timeout_s)
        except ChannelError as exc:
            self._note(f"heartbeat to controller {target} failed: {exc}")
            await self._pause(_RETRY_S)
            return
        code = ErrorCode(int(response.error_code))
        if code in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            log.warning("controller %d answered %s: registering again", target,
                        code.name.upper())
            self.broker_epoch = -1
            return
        if code != ErrorCode.none:
            self._note(f"heartbeat refused by controller {target}: {code.name.upper()}")
            await self._pause(_RETRY_S)
            return
        self.last_error = None
        self.caught_up = bool(response.is_caught_up)
        was_fenced, self.fenced = self.fenced, bool(response.is_fenced)
        if was_fenced and not self.fenced:
            log.info("unfenced by controller %d (metadata caught up)", target)
            self.unfenced.set()
        elif not was_fenced and self.fenced and not self.want_shut_down:
            log.warning("fenced by controller %d", target)
        if response.should_shut_down:
            self.shut_down_allowed.set()
        wait = s.heartbeat_interval_ms / 1000
        if self.want_shut_down or (self.fenced and not self.want_shut_down):
            # catching up or shutting down: the next answer matters soon
            wait = min(wait, _SHUTDOWN_POLL_S if self.want_shut_down else 0.25)
        await self._pause(max(0.0, wait - (time.monotonic() - began)))

    async def _pause(self, seconds: float) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    def _note(self, message: str) -> None:
        # one line per new kind of failure, not one per retry
        if message != self.last_error:
            log.info("%s", message)
        self.last_error = message

    def heartbeat_now(self) -> None:
        """Send the next heartbeat at once (a log directory failed: Kafka's
        propagateDirectoryFailure reports it without waiting for the interval)."""
        self._wake.set()

    def set_ready(self) -> None:
        """Logs loaded, partitions following the image: the controller may unfence us."""
        self.ready_to_unfence = True
        self._wake.set()

    def status(self) -> dict[str, Any]:
        return {"broker_epoch": self.broker_epoch, "fenced": self.fenced,
                "caught_up": self.caught_up, "want_shut_down": self.want_shut_down}
