"""Fixtures shared by several integration modules (registered here so that a session-scoped
one is one instance for all of them, not one per importing module)."""

from tests.support.connect import (  # noqa: F401
    connect,
    connect_node,
    connect_ports,
    connect_postgres,
)
