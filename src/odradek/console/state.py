"""What every request of the console needs: the cluster, the decoder, the reader, the lag
history and where the registry and admin HTTP are."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from odradek.console.cluster import Cluster
from odradek.console.decode import Decoder
from odradek.console.lag_history import LagHistory
from odradek.console.messages import Reader
from odradek.console.paging import BadRequest

T = TypeVar("T")
MAX_BODY = 1 << 20  # bytes of a JSON body: a produced record or a config change


@dataclass
class Console:
    cluster: Cluster
    decoder: Decoder
    reader: Reader
    history: LagHistory
    registry_url: str | None = None
    admin_url: str | None = None


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking client call off the event loop."""
    return await run_in_threadpool(fn, *args, **kwargs)


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise BadRequest(f"the body is over {MAX_BODY} bytes")
    import json

    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        raise BadRequest("the body must be a JSON object") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def text_field(body: dict[str, Any], name: str, required: bool = True) -> str:
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise BadRequest(f"{name} is required")
        return ""
    if not isinstance(value, str | int):
        raise BadRequest(f"{name} must be a string")
    return str(value)


def int_field(body: dict[str, Any], name: str, default: int | None, lo: int, hi: int) -> int:
    value = body.get(name, default)
    if value is None or value == "":
        if default is None:
            raise BadRequest(f"{name} is required")
        value = default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {str(value)[:40]!r}") from None
    if not lo <= number <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {number}")
    return number
