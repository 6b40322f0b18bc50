"""The lock decorator of a Log's methods, shared by log.py and the modules mixed into Log."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeVar

__all__ = ["locked"]


class _HasLock(Protocol):
    lock: threading.RLock


_S = TypeVar("_S", bound=_HasLock)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def locked(fn: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Run a method under the log's lock: the cleaner thread swaps segments in while the
    event loop appends and reads (an uncontended lock costs well under a microsecond)."""

    def wrapper(self: _S, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self.lock:
            return fn(self, *args, **kwargs)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
