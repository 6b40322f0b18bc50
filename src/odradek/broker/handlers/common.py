"""Helpers shared by the handlers: decode, build and encode through kio."""

from __future__ import annotations

import re
from typing import Any

from odradek.broker.entities import build, nested_class
from odradek.broker.refusals import REFUSALS
from odradek.protocol.apis import response_header_version
from odradek.protocol.messages import (
    decode_request,
    encode_response,
    encode_response_with_items,
    response_class,
)

Response = tuple[int, list[Any]]

# Kafka's Topic.validate: 1-249 chars of [a-zA-Z0-9._-], not "." or ".."
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Kafka's internal topics: shown as internal in Metadata, written only by their coordinators
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def valid_topic_name(name: str | None) -> bool:
    return bool(name) and name not in (".", "..") and _LEGAL.fullmatch(name) is not None  # type: ignore[arg-type]


def decode(header: Any, frame: memoryview) -> Any:
    return decode_request(header.api_key, header.api_version, frame, header.body_offset)


def respond(header: Any, values: dict[str, Any]) -> Response:
    """Build the response for the request's version from plain values and encode it.

    A non-routine error code in the values is logged here, once for every handler
    (refusals.py decides what is routine and keeps a flood out of the log).
    """
    REFUSALS.response(header, values)
    throttle = getattr(header, "throttle_ms", 0)  # issue 16: a quota's throttle (authz.py)
    if throttle and "throttle_time" in values:
        values["throttle_time"] = max(throttle, int(values["throttle_time"] or 0))
    cls = response_class(header.api_key, header.api_version)
    entity = build(cls, values)
    return response_header_version(header.api_key, header.api_version), [encode_response(entity)]


def item_class(header: Any, name: str) -> Any:
    """The entity class of the elements of response field `name` at the request's version."""
    return nested_class(response_class(header.api_key, header.api_version), name)


def encode_item(header: Any, name: str, values: dict[str, Any]) -> bytes:
    """One element of response field `name`, encoded alone (for respond_with_items)."""
    return encode_response(build(item_class(header, name), values))


def respond_with_items(header: Any, values: dict[str, Any], name: str,
                       items: list[bytes]) -> Response:
    """As respond, with field `name` made of elements already encoded (encode_item): their
    error codes are the caller's to log (refusals.py sees only `values`)."""
    REFUSALS.response(header, values)
    throttle = getattr(header, "throttle_ms", 0)
    if throttle and "throttle_time" in values:
        values["throttle_time"] = max(throttle, int(values["throttle_time"] or 0))
    entity = build(response_class(header.api_key, header.api_version), {**values, name: ()})
    return (response_header_version(header.api_key, header.api_version),
            [encode_response_with_items(entity, name, items)])


def code(value: Any) -> int:
    return int(value)
