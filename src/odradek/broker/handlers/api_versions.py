"""ApiVersions: the versions this node serves (exactly the registered handlers)."""

from __future__ import annotations

from typing import Any

from odradek.broker.entities import build
from odradek.broker.handlers.common import Response, respond
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import encode_response, response_class


def _api_keys(advertised: dict[int, tuple[int, int]]) -> list[dict[str, int]]:
    return [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(advertised.items())]


VERSIONS = (ApiVersionRange(ApiKey.API_VERSIONS, 0, 4),)


def handle(ctx: Any, header: Any, frame: memoryview) -> Response:
    # the request body (client software name/version) is not needed to answer
    return respond(header, {"error_code": ErrorCode.none, "api_keys": _api_keys(ctx.advertised_apis),
                            "throttle_time": 0})


def unsupported(ctx: Any, header: Any) -> Response:
    """A version we do not know: answer v0 with UNSUPPORTED_VERSION and our list."""
    cls = response_class(18, 0)
    entity = build(cls, {"error_code": ErrorCode.unsupported_version,
                         "api_keys": _api_keys(ctx.advertised_apis)})
    return 0, [encode_response(entity)]
