"""What a SASL server mechanism is to the connection that drives it."""

from __future__ import annotations

from typing import Protocol

__all__ = ["SaslFailure", "SaslMechanism"]


class SaslFailure(Exception):
    """Authentication failed. The message goes to the client in SaslAuthenticate's
    error_message, so it never holds a password or a key."""


class SaslMechanism(Protocol):
    name: str
    complete: bool
    username: str | None  # the authenticated name once complete
    # seconds since the epoch the credential stops being valid (a token's exp), or None
    expires_at: float | None

    def step(self, token: bytes) -> bytes:
        """The client's next token -> the server's answer; raises SaslFailure."""
        ...
