"""How handlers ask the authorizer (issue 16): the request's Session rides on its header.

With no authorizer configured (Kafka's default) nothing here runs on the hot path: the
Dispatcher leaves the header as parsed and each handler's first test, `ctx.authorizer is
None`, lets everything through. With one, the Dispatcher hands handlers a `SessionHeader`
(the same tuple plus the connection's Session) and they ask `allowed(...)` per resource, as
Kafka's KafkaApis asks its authorizer.
"""

from __future__ import annotations

from typing import Any

from odradek.metadata.acls import CLUSTER_NAME, AclOperation, ResourceType
from odradek.protocol.apis import ApiKey
from odradek.protocol.headers import RequestHeader
from odradek.security.authorizer import supported_operations_bitfield
from odradek.security.principal import Session
from odradek.security.quotas import PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE

__all__ = ["SessionHeader", "allowed", "api_label", "authorized_operations",
           "cluster_allowed", "session_of", "with_session"]

Op, RT = AclOperation, ResourceType
NO_AUTHORIZED_OPS = -2147483648  # Kafka's Int.MinValue: the client did not ask


class SessionHeader(RequestHeader):
    """A RequestHeader that also carries the Session it came in (an instance attribute:
    NamedTuple subclasses cannot add fields)."""

    session: Session
    conn: Any  # the Connection (quota throttling mutes it)
    throttle_ms: int  # Produce: the quota's throttle time, set before the handler runs


def _peer_ip(conn: Any) -> str:
    peer = getattr(conn, "peer", "")
    host, sep, _ = peer.rpartition(":")
    return host if sep else peer


def session_of_conn(conn: Any) -> Session:
    # `sasl` gives every Connection its Session; until then (and for test doubles) a
    # PLAINTEXT connection is User:ANONYMOUS from its peer address
    session = getattr(conn, "session", None)
    if session is None:
        session = Session(client_address=_peer_ip(conn))
        try:
            conn.session = session
        except AttributeError:
            pass
    return session


def with_session(header: Any, conn: Any) -> SessionHeader:
    out = SessionHeader(*header)
    out.session = session_of_conn(conn)
    out.conn = conn
    out.throttle_ms = 0
    return out


def session_of(header: Any) -> Session | None:
    return getattr(header, "session", None)


_LABELS: dict[int, str] = {
    int(k): "".join(part.capitalize() for part in k.name.split("_")) for k in ApiKey}


def api_label(header: Any) -> str:
    """Kafka's name of the request's API (`Produce`, `OffsetCommit`), as the audit log says."""
    return _LABELS.get(header.api_key, str(header.api_key))


def allowed(ctx: Any, header: Any, op: AclOperation, rt: ResourceType, name: str,
            *, log_if_denied: bool = True) -> bool:
    """Whether the request's principal may do `op` on the resource: always with no authorizer;
    never without a session (a listener whose requests carry none is not a client's)."""
    authz = getattr(ctx, "authorizer", None)  # test doubles of the context may lack it
    if authz is None:
        return True
    session = getattr(header, "session", None)
    if session is None:
        return False
    return bool(authz.authorize(session, op, rt, name, api=api_label(header),
                                log_if_denied=log_if_denied))


def cluster_allowed(ctx: Any, header: Any, op: AclOperation, *,
                    log_if_denied: bool = True) -> bool:
    return allowed(ctx, header, op, RT.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)


def any_allowed(ctx: Any, header: Any, op: AclOperation, rt: ResourceType) -> bool:
    """Kafka's authorizeByResourceType: `op` on some resource of the type."""
    authz = getattr(ctx, "authorizer", None)  # test doubles of the context may lack it
    if authz is None:
        return True
    session = getattr(header, "session", None)
    return session is not None and bool(
        authz.authorize_by_resource_type(session, op, rt, api=api_label(header)))


def authorized_operations(ctx: Any, header: Any, rt: ResourceType, name: str) -> int:
    """An authorized-operations field: with no authorizer every supported operation (as
    Kafka), else what the principal may do on the resource."""
    authz = getattr(ctx, "authorizer", None)  # test doubles of the context may lack it
    if authz is None:
        return supported_operations_bitfield(rt)
    session = getattr(header, "session", None)
    if session is None:
        return 0
    return int(authz.authorized_operations(session, rt, name))


def produce_denials(ctx: Any, header: Any, req: Any) -> dict[str, Any]:
    """Produce's checks, as KafkaApis makes them: a transactional request needs Write on its
    transactional id (else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    then each topic Write (else TOPIC_AUTHORIZATION_FAILED). Idempotence is checked when the
    producer id is handed out (InitProducerId), as in Kafka since KIP-679."""
    from odradek.protocol.errors import ErrorCode

    names = {t.name for t in req.topics}
    txn = getattr(req, "transactional_id", None)
    if txn is not None and not allowed(ctx, header, Op.WRITE, RT.TRANSACTIONAL_ID, txn):
        return dict.fromkeys(names, ErrorCode.transactional_id_authorization_failed)
    return {name: ErrorCode.topic_authorization_failed for name in names
            if not allowed(ctx, header, Op.WRITE, RT.TOPIC, name)}


def guarded(ctx: Any, header: Any, conn: Any, frame: memoryview) -> SessionHeader:
    """The header with its Session, and the quota throttle its answer carries (the channel
    is muted that long): a Produce is charged against producer_byte_rate by its size here;
    every request waits out request_percentage when the time its client's requests took so
    far is over it (the time of this one is charged after it ran: charge_request_time)."""
    out = with_session(header, conn)
    quotas = ctx.quotas
    if quotas is None or not quotas.active:
        return out
    user, client = out.session.principal.name, header.client_id or ""
    throttle = quotas.throttle_ms(REQUEST_PERCENTAGE, user, client)
    if header.api_key == 0:
        throttle = max(throttle, quotas.record(PRODUCER_BYTE_RATE, user, client, len(frame)))
    if throttle > 0:
        out.throttle_ms = throttle
        mute = getattr(conn, "mute", None)
        if mute is not None:
            mute(throttle)
    return out


def charge_request_time(ctx: Any, header: Any, seconds: float) -> None:
    """request_percentage: the handler's time on the event loop, in Kafka's unit (percent of
    one thread: 1 s of work in a second is 100)."""
    quotas = ctx.quotas
    if quotas is not None and quotas.active and isinstance(header, SessionHeader):
        quotas.record(REQUEST_PERCENTAGE, header.session.principal.name,
                      header.client_id or "", seconds * 100.0)
