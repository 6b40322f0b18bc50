"""ApiVersions: the versions this node serves (exactly the registered handlers), and from v3
the features: what this build supports and the cluster's finalized levels (metadata.version,
transaction.version), which is how Java 4.x clients learn that KIP-890 transactions are on."""

from __future__ import annotations

from typing import Any

from odradek.broker.entities import build
from odradek.broker.handlers.common import Response, respond
from odradek.broker.refusals import count_codes
from odradek.metadata.controller_features import SUPPORTED_FEATURES
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import encode_response, response_class


def _api_keys(advertised: dict[int, tuple[int, int]]) -> list[dict[str, int]]:
    return [{"api_key": k, "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(advertised.items())]


VERSIONS = (ApiVersionRange(ApiKey.API_VERSIONS, 0, 4),)


def _features(ctx: Any) -> dict[str, Any]:
    """The v3+ tagged fields. The finalized features' epoch is the offset of the metadata
    image they come from (Kafka's), so a client can tell a newer answer from an older one."""
    image = ctx.image
    return {
        "supported_features": [{"name": n, "min_version": lo, "max_version": hi}
                               for n, (lo, hi) in sorted(SUPPORTED_FEATURES.items())],
        "finalized_features_epoch": image.offset,
        "finalized_features": [{"name": n, "min_version_level": level,
                                "max_version_level": level}
                               for n, level in sorted(image.features.items())],
    }


def handle(ctx: Any, header: Any, frame: memoryview) -> Response:
    # the request body (client software name/version) is not needed to answer
    values = {"error_code": ErrorCode.none, "api_keys": _api_keys(ctx.advertised_apis),
              "throttle_time": 0}
    if header.api_version >= 3:
        values.update(_features(ctx))
    return respond(header, values)


def unsupported(ctx: Any, header: Any) -> Response:
    """A version we do not know: answer v0 with UNSUPPORTED_VERSION and our list."""
    count_codes(ApiKey.API_VERSIONS, (ErrorCode.unsupported_version,))  # errors_total
    cls = response_class(18, 0)
    entity = build(cls, {"error_code": ErrorCode.unsupported_version,
                         "api_keys": _api_keys(ctx.advertised_apis)})
    return 0, [encode_response(entity)]
