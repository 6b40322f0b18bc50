"""SaslHandshake (17) v0-v1 and SaslAuthenticate (36) v0-v2 where no SASL exchange runs:
on a listener that is not SASL_PLAINTEXT or SASL_SSL, or after authentication without a
re-authentication started. Kafka answers both with ILLEGAL_SASL_STATE there. On SASL
listeners the connection's SaslExchange (broker/sasl_exchange.py) answers them instead."""

from __future__ import annotations

from typing import Any

from odradek.broker.handlers.common import Response, respond
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode

VERSIONS = (ApiVersionRange(ApiKey.SASL_HANDSHAKE, 0, 1),
            ApiVersionRange(ApiKey.SASL_AUTHENTICATE, 0, 2))


def handle_handshake(ctx: Any, header: Any, frame: memoryview) -> Response:
    return respond(header, {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []})


def handle_authenticate(ctx: Any, header: Any, frame: memoryview) -> Response:
    return respond(header, {"error_code": ErrorCode.illegal_sasl_state,
                            "error_message": "this listener does not use SASL",
                            "auth_bytes": b""})
