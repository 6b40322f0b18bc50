"""A connection's security session (issue 16): the TLS client certificate's principal, the
SASL exchange, and the answers that end a connection after a failed authentication.

A mixin of broker.server.Connection (its transport, slots and output), kept apart so the
server module holds the framing, dispatch and response paths.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from typing import TYPE_CHECKING, Any

from odradek.broker.listener_security import ListenerSecurity
from odradek.broker.sasl_exchange import CloseAfter, SaslExchange
from odradek.security.principal import KafkaPrincipal, Session
from odradek.security.principal_rules import NoMatchingRule
from odradek.security.sasl.mechanism import SaslFailure
from odradek.security.tls import peer_dn

if TYPE_CHECKING:
    from odradek.broker.server import Server

_SIZE = struct.Struct(">i")


class SessionMixin:
    # what Connection holds
    server: Server
    listener: ListenerSecurity
    session: Session
    sasl: SaslExchange | None
    peer: str
    closed: bool
    transport: asyncio.Transport | None
    dispatch: Any
    _slots: collections.deque[Any]
    _out: list[Any]

    if TYPE_CHECKING:  # Connection's own
        def abort(self, reason: str | None) -> None: ...
        def _flush(self) -> None: ...
        def flush_output(self) -> None: ...
        def _drop_writer(self) -> None: ...

    def _start_session(self, transport: asyncio.BaseTransport) -> None:
        """TLS: the client certificate's principal (ssl.principal.mapping.rules) on an SSL
        listener; SASL listeners start the exchange that authenticates the session."""
        listener = self.listener
        if listener.ssl_context is not None and listener.sasl is None:
            dn = peer_dn(transport)
            if dn is not None:
                try:
                    self.session.principal = KafkaPrincipal("User", listener.mapper.name_of(dn))
                except NoMatchingRule as exc:
                    self.abort(f"TLS client refused: {exc}")
                    return
        if listener.sasl is not None:
            self.sasl = SaslExchange(listener.sasl, self.session, self.peer)

    def _sasl_request(self, header: Any, frame: memoryview) -> Any:
        assert self.sasl is not None
        result = self.sasl.handle(header, frame)
        return self.dispatch(self, frame, header) if result is None else result

    def _answer_and_close(self, slot: Any, exc: CloseAfter) -> None:
        """A failed authentication: the answer goes out after what was answered before,
        then the connection closes (close, not abort: the answer must arrive)."""
        peer, reason = self.peer, str(exc)
        self.server.auth_failures.note(logging.WARNING, lambda n: (
            f"closing connection from {peer}: {reason} ({n} authentication failure(s) "
            f"since the last such line)"))
        slot.header_version, slot.parts = exc.response
        slot.done = True
        self._slots.append(slot)
        self._flush()
        self.flush_output()
        self._close_gracefully()

    def _close_gracefully(self) -> None:
        self.closed = True
        self._drop_writer()
        if self.transport is not None:
            self.transport.close()

    def _sasl_raw(self, frame: memoryview) -> None:
        """After SaslHandshake v0: a bare token, answered with a bare token."""
        assert self.sasl is not None
        try:
            answer = self.sasl.raw_token(bytes(frame))
        except SaslFailure as failure:
            peer, reason = self.peer, str(failure)
            self.server.auth_failures.note(logging.WARNING, lambda n: (
                f"closing connection from {peer}: SASL authentication failed: {reason} ({n} "
                f"authentication failure(s) since the last such line)"))
            self.flush_output()
            self._close_gracefully()
            return
        self._out += (_SIZE.pack(len(answer)), answer)
        self.flush_output()
