"""Connections from this node to the other nodes of its cluster.

`Channel` is one asyncio connection to one peer: Kafka requests go out pipelined, responses
come back matched by correlation id. `Channels` keeps one per peer node id, opened on first use
and opened again after a failure. The Raft transport, the broker's registration and heartbeats,
forwarding to the active controller and the replica fetchers all speak through these, with
the `ClientSecurity` (TLS, SASL PLAIN/SCRAM) of the listener they reach; odradek's native
client uses the same. Imports `protocol` only; everything above it may import this.
"""

from odradek.network.channel import Channel, ChannelError, Channels
from odradek.network.client_security import AuthenticationFailed, ClientSecurity

__all__ = ["AuthenticationFailed", "Channel", "ChannelError", "Channels", "ClientSecurity"]
