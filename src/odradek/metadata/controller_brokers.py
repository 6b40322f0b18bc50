"""Brokers: registration, heartbeats, fencing and controlled shutdown (a mixin of `Controller`).

Kafka's ClusterControlManager and BrokerHeartbeatManager, sans-I/O:
- A broker registers (BrokerRegistration) and gets as its epoch the offset of its
  RegisterBrokerRecord. It starts fenced; a heartbeat whose current metadata offset has reached
  that offset unfences it (it has caught up with the metadata it must serve from).
- Heartbeat sessions live only in the active controller's memory (as in Kafka): a failover
  gives every registered broker a fresh session from the takeover, the node that led the
  quorum before included (Kafka's ClusterControlManager.activate). `tick(now_ms)` fences a
  broker whose last heartbeat is older than broker.session.timeout.ms, moving its
  leaderships away and taking it out of ISRs; a request that takes a broker out of ISRs (a
  heartbeat asking for a controlled shutdown or fencing, a registration, UnregisterBroker)
  does the same first for the others, so it never hands an ISR to a broker already known dead.
- want_shut_down starts a controlled shutdown: the broker is marked in controlled shutdown,
  its leaderships move and it leaves the ISRs; it is told should_shut_down once it leads
  nothing and every other active broker has caught up past that change, and is then fenced.
  A shutdown that would leave some ISR only to brokers this controller has not heard from
  since it took over waits (`_unheard_heirs`) until they heartbeat or are fenced: a session
  started at the takeover says nothing about whether its broker is alive.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from odradek.metadata.controller_requests import (
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationReply,
    BrokerRegistrationRequest,
)
from odradek.metadata.image import MetadataImage
from odradek.metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerControl", "BrokerState"]

log = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms


class BrokerState(Enum):
    FENCED = "fenced"
    UNFENCED = "unfenced"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    SHUTDOWN_NOW = "shutdown_now"


@dataclass
class _Session:
    last_contact_ms: int
    metadata_offset: int = -1
    shutdown_offset: int = -1  # offset that put it in controlled shutdown
    # heard from in this controller term (a heartbeat or a registration): a session that a
    # takeover started is no sign of life
    heard: bool = False
    # the unheard brokers a controlled shutdown of this broker waits for (logged on change)
    shutdown_waits_for: tuple[int, ...] = ()


class BrokerControl:
    # provided by Controller and the other mixins
    image: MetadataImage
    quorum: Any
    publisher: Any
    _lock: Any
    _commit: Any
    _require_active: Any
    _now: Any
    setting: Any
    check_broker_features: Any
    supported_feature_tuples: Any
    _isr_removal_changes: Any
    _unclean_shutdown_changes: Any
    _offline_election_changes: Any
    directories_offline: Any

    def __init__(self) -> None:
        self._sessions: dict[int, _Session] = {}
        self._sessions_epoch: int | None = None

    # ---------------------------------------------------------------- sessions

    @property
    def session_timeout_ms(self) -> int:
        return int(self.setting("broker.session.timeout.ms", DEFAULT_SESSION_TIMEOUT_MS))

    def _session_table(self, now_ms: int) -> dict[int, _Session]:
        """This controller term's sessions. A new term starts every registered broker's
        session at its first use (the timer's first tick, within 250 ms of activation), as
        Kafka's ClusterControlManager.activate does (its heartbeat manager `touch`es each
        one): a controller that has just taken over knows nothing of the
        brokers' last heartbeats, which went to the old controller. Dating a session from
        older news (the old quorum leader's last Fetch answer, as this code once did)
        fenced a stalled-not-dead leader's broker at the first tick (docs/reliability.md,
        finding 8); the price is that a broker that died with the leadership is fenced one
        full session after the takeover. `_unheard_heirs` keeps a controlled shutdown from
        handing it an ISR meanwhile."""
        epoch = getattr(self.quorum, "leader_epoch", None)
        if epoch != self._sessions_epoch:
            self._sessions, self._sessions_epoch = {}, epoch
        for broker_id in self.image.brokers:
            if broker_id not in self._sessions:
                self._sessions[broker_id] = _Session(now_ms)
        for broker_id in [b for b in self._sessions if b not in self.image.brokers]:
            del self._sessions[broker_id]
        return self._sessions

    def _has_valid_session(self, broker_id: int, now_ms: int) -> bool:
        """Kafka's hasValidSession: an unfenced broker heard from within the timeout."""
        registration = self.image.brokers.get(broker_id)
        if registration is None or registration.fenced:
            return False
        session = self._sessions.get(broker_id)
        if session is None or self._sessions_epoch != getattr(self.quorum, "leader_epoch", None):
            return False
        return now_ms - session.last_contact_ms < self.session_timeout_ms

    def check_broker_epoch(self, broker_id: int, broker_epoch: int) -> None:
        """Kafka's checkBrokerEpoch: BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            raise KafkaError(ErrorCode.broker_id_not_registered,
                             f"Broker ID {broker_id} is not currently registered")
        if registration.epoch != broker_epoch:
            raise KafkaError(ErrorCode.stale_broker_epoch,
                             f"Expected broker epoch {registration.epoch}, but got broker "
                             f"epoch {broker_epoch}")

    def _acceptable(self, fenced: Iterable[int] = (), active: Iterable[int] = ()
                    ) -> Callable[[int], bool]:
        """May this broker lead or join an ISR: active in the image, with `fenced` taken as
        fenced and `active` as active (the state the batch being built leads to)."""
        out, into = set(fenced), set(active)
        brokers = self.image.brokers

        def acceptable(broker_id: int) -> bool:
            if broker_id in into:
                return True
            if broker_id in out:
                return False
            registration = brokers.get(broker_id)
            return registration is not None and registration.active
        return acceptable

    # ---------------------------------------------------------------- registration

    def register_broker(self, request: Any = None, rack: str | None = None,
                        now_ms: int | None = None,
                        log_dirs: Sequence[uuid.UUID] = ()) -> Any:
        """BrokerRegistration: returns a BrokerRegistrationReply. Called with endpoints (or
        nothing) instead of a request, registers this node and unfences it at once (the
        single-node start: one node has nobody to catch up with) and returns its epoch."""
        if not isinstance(request, BrokerRegistrationRequest):
            return self.register_local_broker(request, rack, log_dirs=log_dirs)
        now = self._now(now_ms)
        with self._lock:
            self._require_active()
            self.fence_stale_brokers(now, but=request.broker_id)
            try:
                records = self._registration_records(request, now)
            except KafkaError as exc:
                log.info("broker %d registration refused: %s", request.broker_id, exc.message)
                return BrokerRegistrationReply(exc.code, exc.message or None)
            epoch = records[0].broker_epoch
            self._commit(records)
            self._session_table(now)[request.broker_id] = _Session(now, heard=True)
            log.info("registered broker %d (epoch %d, rack %s, fenced until caught up)",
                     request.broker_id, epoch, request.rack)
            return BrokerRegistrationReply(broker_epoch=epoch)

    def _registration_records(self, req: BrokerRegistrationRequest,
                              now: int) -> list[MetadataRecord]:
        cluster_id = self.image.cluster_id
        if req.cluster_id is not None and cluster_id is not None and req.cluster_id != cluster_id:
            raise KafkaError(ErrorCode.inconsistent_cluster_id,
                             f"Expected cluster ID {cluster_id}, but got cluster ID "
                             f"{req.cluster_id}")
        existing = self.image.brokers.get(req.broker_id)
        self._session_table(now)
        if (existing is not None and existing.incarnation_id != req.incarnation_id
                and self._has_valid_session(req.broker_id, now)):
            raise KafkaError(ErrorCode.duplicate_broker_registration,
                             f"Another broker is registered with that broker id "
                             f"({req.broker_id}), incarnation {existing.incarnation_id}.")
        if req.is_migrating_zk_broker:
            raise KafkaError(ErrorCode.broker_id_not_registered,
                             "ZooKeeper migration is not supported.")
        if not req.listeners:
            raise KafkaError(ErrorCode.invalid_request, "The broker registered no listener.")
        self.check_broker_features(req.features)
        epoch = self.quorum.end_offset
        records: list[MetadataRecord] = [RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=epoch,
            end_points=[BrokerEndpoint(*e) for e in req.listeners],
            features=[BrokerFeature(*f) for f in req.features],
            rack=req.rack,
            fenced=True,
            log_dirs=list(req.log_dirs),
        )]
        fenced = self._acceptable(fenced=[req.broker_id])
        if _unclean_restart(existing, req):
            # KIP-966: a new incarnation without a clean shutdown of the registered one (its
            # PreviousBrokerEpoch is not that registration's epoch) leaves every ISR, even
            # as the last member, before it can be unfenced
            log.info("broker %d registers a new incarnation after an unclean shutdown "
                     "(previous broker epoch %d, registered epoch %s)", req.broker_id,
                     req.previous_broker_epoch, None if existing is None else existing.epoch)
            records += self._unclean_shutdown_changes(req.broker_id, fenced)
        elif existing is not None:
            # the new registration is fenced: what the old one led moves, and it leaves the
            # ISRs (never emptying one) until its leaders take it back
            records += self._isr_removal_changes(req.broker_id, fenced)
        return records

    def register_local_broker(self, endpoints: Iterable[tuple[str, str, int, int]] | None = None,
                              rack: str | None = None, incarnation_id: uuid.UUID | None = None,
                              log_dirs: Sequence[uuid.UUID] = ()) -> int:
        """Register this node, unfenced in the same batch, and elect leaders where it is in
        the ISR of a leaderless partition. Returns the broker epoch."""
        with self._lock:
            self._require_active()
            node_id = self.node_id  # type: ignore[attr-defined]
            if endpoints is None:
                endpoints = _endpoints_from_listeners(
                    self.static_config.advertised_listeners)  # type: ignore[attr-defined]
            epoch = self.quorum.end_offset
            records: list[MetadataRecord] = [
                RegisterBrokerRecord(
                    broker_id=node_id,
                    incarnation_id=incarnation_id or uuid.uuid4(),
                    broker_epoch=epoch,
                    end_points=[BrokerEndpoint(*e) for e in endpoints],
                    features=[BrokerFeature(*f) for f in self.supported_feature_tuples()],
                    rack=rack,
                    fenced=True,
                    log_dirs=list(log_dirs),
                ),
                UnfenceBrokerRecord(node_id, epoch),
            ]
            records += self._offline_election_changes(self._acceptable(active=[node_id]))
            self._commit(records)
            now = self._now(None)
            self._session_table(now)[node_id] = _Session(now, metadata_offset=epoch,
                                                         heard=True)
            return epoch

    def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (64): BROKER_ID_NOT_REGISTERED when unknown; its leaderships move
        and it leaves the ISRs in the same batch."""
        with self._lock:
            self._require_active()
            if broker_id not in self.image.brokers:
                raise KafkaError(ErrorCode.broker_id_not_registered,
                                 f"Broker ID {broker_id} is not currently registered")
            self.fence_stale_brokers(self._now(None), but=broker_id)
            registration = self.image.brokers[broker_id]
            records: list[MetadataRecord] = self._isr_removal_changes(
                broker_id, self._acceptable(fenced=[broker_id]))
            records.append(UnregisterBrokerRecord(broker_id, registration.epoch))
            self._commit(records)
            self._sessions.pop(broker_id, None)
            log.info("unregistered broker %d", broker_id)

    # ---------------------------------------------------------------- heartbeats

    def broker_state(self, broker_id: int) -> BrokerState:
        registration = self.image.brokers[broker_id]
        if registration.fenced:
            return (BrokerState.SHUTDOWN_NOW if registration.in_controlled_shutdown
                    else BrokerState.FENCED)
        if registration.in_controlled_shutdown:
            return BrokerState.CONTROLLED_SHUTDOWN
        return BrokerState.UNFENCED

    def broker_heartbeat(self, req: BrokerHeartbeatRequest,
                         now_ms: int | None = None) -> BrokerHeartbeatReply:
        now = self._now(now_ms)
        with self._lock:
            self._require_active()
            try:
                self.check_broker_epoch(req.broker_id, req.broker_epoch)
            except KafkaError as exc:
                return BrokerHeartbeatReply(exc.code, exc.message or None)
            if req.want_shut_down or req.want_fence:
                # it is about to leave the ISRs: the members it leaves them to must be alive.
                # A plain heartbeat moves no ISR, and there fencing stays the timer's job,
                # as in Kafka (after a stall, the heartbeats queued behind this one would
                # find their senders fenced)
                self.fence_stale_brokers(now, but=req.broker_id)
            registration = self.image.brokers[req.broker_id]
            session = self._session_table(now)[req.broker_id]
            session.last_contact_ms = now
            session.heard = True
            session.metadata_offset = max(session.metadata_offset, req.current_metadata_offset)
            caught_up = req.current_metadata_offset >= registration.epoch
            current = self.broker_state(req.broker_id)
            target = self._next_state(req, current, caught_up, session)
            if (current == BrokerState.UNFENCED and req.want_shut_down and not req.want_fence
                    and self._shutdown_waits(req.broker_id, session)):
                target = current  # not yet: asked again at its next heartbeat
            if target != current:
                self._move_to(req.broker_id, current, target, session)
            # failed log directories (KIP-858): their replicas leave ISRs and leaderships
            self.directories_offline(req.broker_id, req.broker_epoch, req.offline_log_dirs)
            return BrokerHeartbeatReply(
                is_caught_up=caught_up,
                is_fenced=target in (BrokerState.FENCED, BrokerState.SHUTDOWN_NOW),
                should_shut_down=target == BrokerState.SHUTDOWN_NOW,
            )

    def _unheard_heirs(self, broker_id: int) -> list[int]:
        """The brokers that would be left as the only live members of some ISR if
        `broker_id` left it now, and that this controller has not heard from since it took
        over (their sessions started at the takeover, not at a heartbeat).

        Such a broker may be dead: a failover starts every session afresh, so it is fenced
        only a session timeout after the takeover, and an ISR handed to it meanwhile stays
        with a dead broker, which comes back unclean and cannot lead (docs/reliability.md,
        findings 5 and 7: partitions stayed offline though the broker that shut down
        cleanly held every acknowledged record). Kafka 4.1+ keeps the leaving broker as an
        eligible leader replica (KIP-966) instead; we have no ELR, so the controlled
        shutdown waits until each such heir heartbeats (it is alive: the shutdown goes on
        as in Kafka) or is fenced (the leaving broker stays the last member). The wait is
        at most one session timeout after a takeover, well within the broker's shutdown
        timeout."""
        acceptable = self._acceptable(fenced=[broker_id])
        heirs: set[int] = set()
        for topic in self.image.topics_by_id.values():
            for part in topic.partitions.values():
                if broker_id not in part.isr:
                    continue
                live = [r for r in part.isr if r != broker_id and acceptable(r)
                        and r in self._sessions]
                if live and not any(self._sessions[r].heard for r in live):
                    heirs.update(live)
        return sorted(heirs)

    def _shutdown_waits(self, broker_id: int, session: _Session) -> bool:
        """Must this broker's controlled shutdown wait for unheard heirs (`_unheard_heirs`)?"""
        heirs = tuple(self._unheard_heirs(broker_id))
        if heirs != session.shutdown_waits_for:
            session.shutdown_waits_for = heirs
            if heirs:
                log.info("broker %d's controlled shutdown waits: it would leave ISRs to "
                         "broker(s) %s, not heard from since this controller took over "
                         "(until they heartbeat or are fenced)", broker_id, list(heirs))
        return bool(heirs)

    def _leads_anything(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for t in self.image.topics_by_id.values()
                   for p in t.partitions.values())

    def _lowest_active_offset(self, but: int) -> float:
        """The lowest metadata offset an active broker (other than `but`) has reported."""
        offsets = [s.metadata_offset for b, s in self._sessions.items()
                   if b != but and b in self.image.brokers and self.image.brokers[b].active]
        return min(offsets) if offsets else float("inf")

    def _next_state(self, req: BrokerHeartbeatRequest, current: BrokerState, caught_up: bool,
                    session: _Session) -> BrokerState:
        """Kafka's BrokerHeartbeatManager.calculateNextBrokerState."""
        s = BrokerState
        if current == s.FENCED:
            if req.want_shut_down:
                return s.SHUTDOWN_NOW
            if not req.want_fence and caught_up:
                return s.UNFENCED
            return s.FENCED
        if current == s.UNFENCED:
            if req.want_fence:
                return s.SHUTDOWN_NOW if req.want_shut_down else s.FENCED
            if req.want_shut_down:
                return (s.CONTROLLED_SHUTDOWN if self._leads_anything(req.broker_id)
                        else s.SHUTDOWN_NOW)
            return s.UNFENCED
        if current == s.CONTROLLED_SHUTDOWN:
            if self._leads_anything(req.broker_id):
                return s.CONTROLLED_SHUTDOWN
            if session.shutdown_offset <= self._lowest_active_offset(req.broker_id):
                return s.SHUTDOWN_NOW
            return s.CONTROLLED_SHUTDOWN
        return s.SHUTDOWN_NOW

    def _move_to(self, broker_id: int, current: BrokerState, target: BrokerState,
                 session: _Session) -> None:
        registration = self.image.brokers[broker_id]
        epoch = registration.epoch
        s = BrokerState
        records: list[MetadataRecord] = []
        if target == s.UNFENCED:
            records.append(UnfenceBrokerRecord(broker_id, epoch))
            records += self._offline_election_changes(self._acceptable(active=[broker_id]))
            log.info("broker %d caught up: unfenced", broker_id)
        elif target == s.FENCED:
            records += self._isr_removal_changes(broker_id, self._acceptable(fenced=[broker_id]))
            records.append(FenceBrokerRecord(broker_id, epoch))
            log.info("broker %d asked to be fenced", broker_id)
        elif target == s.CONTROLLED_SHUTDOWN:
            records.append(BrokerRegistrationChangeRecord(broker_id, epoch,
                                                          in_controlled_shutdown=1))
            records += self._isr_removal_changes(broker_id, self._acceptable(fenced=[broker_id]))
            log.info("broker %d in controlled shutdown: moving its leaderships", broker_id)
        else:  # SHUTDOWN_NOW: fenced, marked as shut down
            if current != s.FENCED or not registration.in_controlled_shutdown:
                records += self._isr_removal_changes(broker_id,
                                                     self._acceptable(fenced=[broker_id]))
                records.append(BrokerRegistrationChangeRecord(
                    broker_id, epoch, fenced=1 if not registration.fenced else 0,
                    in_controlled_shutdown=1))
            log.info("broker %d may shut down", broker_id)
        if records:
            self._commit(records)
        if target == s.CONTROLLED_SHUTDOWN:
            session.shutdown_offset = self.publisher.offset

    # ---------------------------------------------------------------- fencing

    def fence_stale_brokers(self, now_ms: int, but: int | None = None) -> list[int]:
        """Fence every unfenced broker whose session expired (but `but`, the broker whose
        request is being handled: it is alive); returns their ids.

        `tick` calls it, and so does every request that takes a broker out of ISRs and
        leaderships (a heartbeat asking for a controlled shutdown or fencing, a
        registration, UnregisterBroker), before acting: those changes hand ISRs and
        leaderships to the other members that look alive, and a member whose session this
        controller already knows ran out is dead, not alive (docs/reliability.md, finding
        5: an ISR left to a dead, unfenced broker, which came back from a kill -9 unclean
        and so could not lead). Kafka fences only from its timer."""
        fenced: list[int] = []
        timeout = self.session_timeout_ms
        for broker_id, session in sorted(self._session_table(now_ms).items()):
            if broker_id == but:
                continue
            registration = self.image.brokers.get(broker_id)
            if registration is None or registration.fenced:
                continue
            if now_ms - session.last_contact_ms < timeout:
                continue
            records = self._isr_removal_changes(broker_id, self._acceptable(fenced=[broker_id]))
            records.append(FenceBrokerRecord(broker_id, registration.epoch))
            # one broker per batch: the next one's changes are computed on this one's result
            self._commit(records)
            fenced.append(broker_id)
            log.warning("broker %d fenced: no heartbeat for %d ms (broker.session.timeout.ms "
                        "= %d)", broker_id, now_ms - session.last_contact_ms, timeout)
        return fenced


def _unclean_restart(existing: Any, req: BrokerRegistrationRequest) -> bool:
    """A new incarnation whose previous broker epoch is not the registered one's: it did not
    shut down cleanly from that registration (or there is none to compare with)."""
    if existing is not None and existing.incarnation_id == req.incarnation_id:
        return False  # the same process registering again: its logs are what they were
    return existing is None or req.previous_broker_epoch != existing.epoch


def _endpoints_from_listeners(listeners: Sequence[str]) -> list[tuple[str, str, int, int]]:
    protocols = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
    out = []
    for listener in listeners:
        name, _, rest = listener.partition("://")
        host, _, port = rest.rpartition(":")
        try:
            port_number = int(port)
        except ValueError:
            continue
        out.append((name, host.strip("[]"), port_number, protocols.get(name.upper(), 0)))
    return out
