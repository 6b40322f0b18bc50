"""Server-side search and pagination: a page of a long list (1,000 topics stay one page of
rows in the browser) and the parsing of the page parameters, refusing bad ones with a message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

DEFAULT_SIZE = 50
MAX_SIZE = 500
MAX_QUERY_CHARS = 249  # the longest topic name; a longer search matches nothing anyway


class BadRequest(ValueError):
    """A parameter the console cannot use: answered 400 with this message."""


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    page: int  # 1-based
    size: int
    total: int  # items matching the search

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


def int_param(params: Mapping[str, str], name: str, default: int | None, lo: int,
              hi: int) -> int:
    """An integer query parameter within [lo, hi]; BadRequest says what is wrong."""
    raw = params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise BadRequest(f"{name} is required")
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def matches(name: str, query: str) -> bool:
    """Case-insensitive substring match; every space-separated word must occur."""
    low = name.lower()
    return all(word in low for word in query.lower().split())


def paginate(names: Sequence[str], query: str, page: int, size: int) -> Page[str]:
    """The page-th page (1-based) of the names matching `query`, in the order given. A page
    past the end is the last page (the list shrank under the user: show what is there)."""
    if size < 1 or page < 1:
        raise BadRequest("page and size start at 1")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"the search is longer than {MAX_QUERY_CHARS} characters")
    hits = [n for n in names if matches(n, query)] if query.strip() else list(names)
    last = max(1, -(-len(hits) // size))
    page = min(page, last)
    start = (page - 1) * size
    return Page(hits[start:start + size], page, size, len(hits))


def page_params(params: Mapping[str, str]) -> tuple[str, int, int]:
    """(q, page, size) from a request's query string."""
    query = params.get("q", "")
    if len(query) > MAX_QUERY_CHARS:
        raise BadRequest(f"the search is longer than {MAX_QUERY_CHARS} characters")
    return (query, int_param(params, "page", 1, 1, 1 << 31),
            int_param(params, "size", DEFAULT_SIZE, 1, MAX_SIZE))
