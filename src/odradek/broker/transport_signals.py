"""What a handler raises to tell the connection what to do, not what to answer.

Handlers import these without importing the server (the server catches them): today only
`Disconnect`, Kafka's way of answering a request it must not or cannot answer (an acks=0
produce that failed, an unknown API key or version).
"""

from __future__ import annotations

__all__ = ["Disconnect"]


class Disconnect(Exception):
    """Raised by a handler: log the message and close this connection."""
