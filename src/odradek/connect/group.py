"""A Connect worker's membership in its group (`group.id`), over the Kafka protocol with
odradek's native client connection: FindCoordinator, JoinGroup (protocol type "connect"),
SyncGroup, Heartbeat, LeaveGroup, on one thread.

A member keeps running what it has while the group rebalances and then runs exactly what the
SyncGroup answer hands it (`on_assign`): the assignor is sticky, so only connectors that move
restart. (Connect's eager protocol stops everything first; that would restart every Spark
query at every rebalance. The price: while a connector moves between two live workers the new
owner may start it before the old one has stopped it, which at-least-once delivery allows.)
A member that lost its membership (session expired, fenced) stops everything (`on_revoke`)
before joining again: its connectors may already run elsewhere. The member the coordinator names leader computes every member's assignment
with `group_protocol.assign` from its own view of connect-configs. A member whose session
lapses (a worker killed) is dropped by the coordinator, the others rebalance, and its
connectors move to them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from odradek.client.connection import Connection, servers
from odradek.connect import group_protocol as gp

log = logging.getLogger(__name__)

FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOADING = 15, 16, 14
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 22, 25, 27
MEMBER_ID_REQUIRED = 79
_FIND_AGAIN = {COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOADING}

# (config offset, {connector: task count}) as this worker has read connect-configs.
ConfigView = Callable[[], tuple[int, dict[str, int]]]


class GroupError(Exception):
    def __init__(self, code: int, what: str) -> None:
        super().__init__(f"{what}: error {code}")
        self.code = code


class GroupMember:
    def __init__(self, bootstrap: str, group_id: str, url: str, view: ConfigView,
                 on_assign: Callable[[gp.Assignment], None], on_revoke: Callable[[], None],
                 owners: Callable[[], dict[str, str]] = dict,
                 session_timeout_ms: int = 10_000, rebalance_timeout_ms: int = 60_000,
                 heartbeat_interval_ms: int = 3_000, security: Any = None) -> None:
        self.bootstrap = bootstrap
        self.security = security  # the native connection's TLS/SASL (None: plaintext)
        self.group_id = group_id
        self.url = url
        self.view = view
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.owners = owners
        self.session_timeout = session_timeout_ms
        self.rebalance_timeout = rebalance_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.member_id = ""
        self.generation = -1
        self.assignment: gp.Assignment | None = None
        self._conn: Connection | None = None
        self._rejoin = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- life cycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="connect-group", daemon=True)
        self._thread.start()

    def request_rejoin(self) -> None:
        """Something to assign changed (connectors added or removed): rebalance."""
        self._rejoin.set()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._conn is not None and self.member_id:
            try:
                from kio.schema.leave_group.v3.request import LeaveGroupRequest, MemberIdentity

                self._call(LEAVE_GROUP, 3, LeaveGroupRequest(
                    group_id=self.group_id, members=(MemberIdentity(member_id=self.member_id),)))
            except (OSError, GroupError) as exc:
                log.info("leaving group %s: %s", self.group_id, exc)
        if self._conn is not None:
            self._conn.close()

    # ---- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        joined = False
        while not self._stop.is_set():
            try:
                if self._conn is None:
                    self._conn = self._coordinator()
                if not joined or self._rejoin.is_set():
                    self._rejoin.clear()
                    joined = self._join_and_sync()
                    continue
                if self._stop.wait(self.heartbeat_interval) or self._rejoin.is_set():
                    continue
                joined = self._heartbeat()
            except GroupError as exc:
                log.info("group %s: %s; joining again", self.group_id, exc)
                joined = False
                if exc.code in _FIND_AGAIN:
                    self._drop_connection()
                if exc.code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
                    self.member_id = ""
                    self._revoke()
                self._stop.wait(0.2)
            except (OSError, ConnectionError) as exc:
                log.info("group %s: coordinator connection lost (%s)", self.group_id, exc)
                joined = False
                self._drop_connection()
                self._stop.wait(0.5)

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _revoke(self) -> None:
        if self.assignment is not None:
            self.assignment = None
            self.on_revoke()

    def _call(self, api_key: int, version: int, request: Any,
              timeout_s: float | None = None) -> Any:
        from odradek.protocol.messages import decode_response, encode_request

        assert self._conn is not None
        if timeout_s is not None:
            self._conn.sock.settimeout(timeout_s)
        corr = self._conn.send(api_key, version, encode_request(request))
        return decode_response(api_key, version, self._conn.receive(corr), 4)

    def _coordinator(self) -> Connection:
        from kio.schema.find_coordinator.v2.request import FindCoordinatorRequest

        from odradek.protocol.messages import decode_response, encode_request

        last: Exception | None = None
        for host, port in servers(self.bootstrap):
            try:
                conn = Connection(host, port, f"connect-{self.url}", 30.0, 16 << 20,
                                  self.security)
            except OSError as exc:
                last = exc
                continue
            try:
                corr = conn.send(FIND_COORDINATOR, 2, encode_request(
                    FindCoordinatorRequest(key=self.group_id)))
                found: Any = decode_response(FIND_COORDINATOR, 2, conn.receive(corr), 4)
            finally:
                conn.close()
            code = int(found.error_code.value)
            if code:
                raise GroupError(code, "FindCoordinator")
            return Connection(found.host, int(found.port), f"connect-{self.url}", 30.0,
                              16 << 20, self.security)
        raise ConnectionError(f"no bootstrap server reachable: {last}")

    def _join_and_sync(self) -> bool:
        from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
        from kio.schema.sync_group.v3.request import SyncGroupRequest, SyncGroupRequestAssignment
        from kio.static.primitive import i32

        offset, connectors = self.view()
        request = JoinGroupRequest(
            group_id=self.group_id, session_timeout=timedelta(milliseconds=self.session_timeout),
            rebalance_timeout=timedelta(milliseconds=self.rebalance_timeout),
            member_id=self.member_id, protocol_type=gp.PROTOCOL_TYPE,
            protocols=tuple(JoinGroupRequestProtocol(name=name, metadata=meta) for name, meta
                            in gp.protocols(gp.WorkerState(self.url, offset))))
        # The coordinator answers a JoinGroup when the rebalance completes: up to the
        # rebalance timeout.
        joined = self._call(JOIN_GROUP, 5, request, self.rebalance_timeout / 1000 + 10)
        code = int(joined.error_code.value)
        if code == MEMBER_ID_REQUIRED:  # KIP-394: join again with the id it gave us
            self.member_id = joined.member_id
            return False
        if code:
            raise GroupError(code, "JoinGroup")
        self.member_id = joined.member_id
        self.generation = int(joined.generation_id)
        assignments: tuple[SyncGroupRequestAssignment, ...] = ()
        if joined.leader == self.member_id:
            members = {m.member_id: gp.decode_metadata(m.metadata) for m in joined.members}
            offset, connectors = self.view()
            plan = gp.assign(self.member_id, members, offset, connectors, self.owners())
            assignments = tuple(SyncGroupRequestAssignment(
                member_id=m, assignment=gp.encode_assignment(a))
                for m, a in plan.assignments.items())
            log.info("group %s generation %d: leader of %d members, %d connectors",
                     self.group_id, self.generation, len(members), len(connectors))
        synced = self._call(SYNC_GROUP, 3, SyncGroupRequest(
            group_id=self.group_id, generation_id=i32(self.generation), member_id=self.member_id,
            assignments=assignments), self.rebalance_timeout / 1000 + 10)
        code = int(synced.error_code.value)
        if code:
            raise GroupError(code, "SyncGroup")
        assignment = gp.decode_assignment(synced.assignment)
        if assignment.error == gp.CONFIG_MISMATCH:
            log.info("group %s: the leader read connect-configs to %d; reading further",
                     self.group_id, assignment.config_offset)
            self._await_offset(assignment.config_offset)
            return False
        self.assignment = assignment
        log.info("group %s generation %d: assigned %s", self.group_id, self.generation,
                 sorted(assignment.connectors) or "nothing")
        self.on_assign(assignment)
        return True

    def _await_offset(self, offset: int) -> None:
        deadline = time.monotonic() + 30
        while self.view()[0] < offset and time.monotonic() < deadline:
            time.sleep(0.1)

    def _heartbeat(self) -> bool:
        from kio.schema.heartbeat.v3.request import HeartbeatRequest
        from kio.static.primitive import i32

        answer = self._call(HEARTBEAT, 3, HeartbeatRequest(
            group_id=self.group_id, generation_id=i32(self.generation), member_id=self.member_id),
            30.0)
        code = int(answer.error_code.value)
        if code == REBALANCE_IN_PROGRESS:
            return False
        if code:
            raise GroupError(code, "Heartbeat")
        return True
