"""Where to connect: the bootstrap address and the librdkafka settings built from it."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"


def resolve_bootstrap(explicit: str | None = None) -> str:
    """An explicit address wins, then `ODRADEK_BOOTSTRAP`, then localhost:9092."""
    if explicit:
        return explicit
    return os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP


def parse_key_values(pairs: list[str], what: str = "setting") -> dict[str, str]:
    """`["a=1", "b=x=y"]` -> `{"a": "1", "b": "x=y"}`; a pair without `=` is a ValueError."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{what} {pair!r} is not key=value")
        out[key.strip()] = value
    return out


# librdkafka's log lines go to this Python logger instead of straight to stderr, so a tool
# decides what the user sees (the CLI shows errors once, as Kafka error names).
LIBRDKAFKA_LOGGER = logging.getLogger("odradek.client.librdkafka")


def client_config(bootstrap: str | None, overrides: Mapping[str, object] | None = None,
                  **defaults: object) -> dict[str, object]:
    """librdkafka settings: our defaults (dots spelled as underscores), then caller overrides."""
    conf: dict[str, object] = {"bootstrap.servers": resolve_bootstrap(bootstrap),
                               "logger": LIBRDKAFKA_LOGGER}
    conf.update({key.replace("_", "."): value for key, value in defaults.items()})
    if overrides:
        conf.update(overrides)
    return conf
