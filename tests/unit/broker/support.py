"""A real broker without sockets: controller, logs and replica manager in a temp dir, a
BrokerContext over them, and the Dispatcher the server calls, fed encoded request frames.

Requests are built and responses read with kio (through protocol.messages), the codec the
handlers do not use on their hot paths (Produce, Fetch), so the tests check those against an
independent reference.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from pathlib import Path
from typing import Any

from odradek.broker.apis import Dispatcher, advertised_apis
from odradek.broker.config import Listener
from odradek.broker.context import BrokerContext
from odradek.broker.entities import build
from odradek.broker.server import Connection, Server
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.config.log_config import log_config
from odradek.metadata.controller import Controller, load_image
from odradek.metadata.quorum import MetadataQuorum
from odradek.protocol.apis import ApiKey, response_header_version
from odradek.protocol.fetch import FileRegion
from odradek.protocol.headers import encode_request_header, parse_request_header
from odradek.protocol.messages import decode_response, encode_request, request_class
from odradek.replication.manager import ReplicaManager
from odradek.storage.log_manager import LogManager

PEER = "10.1.2.3:40000"


class Broker:
    """One node's request path over real parts; `call` answers like the server would."""

    def __init__(self, path: Path, **props: str) -> None:
        self.quorum = MetadataQuorum.open(path, node_id=1)
        config = BrokerConfig.from_properties(props)
        self.controller = Controller(self.quorum, load_image(self.quorum, "cid"), config)
        self.controller.bootstrap()
        self.controller.register_broker([("PLAINTEXT", "localhost", 9092, 0)])
        self.log_manager = LogManager(path, log_config({}, config))
        self.rm = ReplicaManager(
            self.log_manager, 1, path,
            lambda t: log_config(self.controller.image.topic_configs(t), config))
        self.rm.load(self.controller.image)
        self.ctx = BrokerContext(static_config=config, node_id=1, cluster_id="cid", log_dir=path,
                                 advertised=[Listener("PLAINTEXT", "localhost", 9092)],
                                 controller=self.controller, replica_manager=self.rm,
                                 advertised_apis=advertised_apis())
        self.dispatch = Dispatcher(self.ctx)
        # the server's own connection object, never attached to a socket: the dispatcher
        # reads only its peer address (for the refusal log)
        self.conn = Connection(Server(self.dispatch, 100 << 20))
        self.conn.peer = PEER
        self._correlation = 0

    def frame(self, api_key: int, version: int, body: bytes, client_id: str | None = "t") -> bytes:
        self._correlation += 1
        return encode_request_header(api_key, version, self._correlation, client_id) + body

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> bytes:
        """The encoded request body, from plain values (kio's classes and defaults)."""
        return encode_request(build(request_class(api_key, version), values))

    def raw(self, frame: bytes) -> tuple[int, bytes] | None:
        """Dispatch one frame; returns (response header version, body bytes) or None."""
        mv = memoryview(frame)
        result = self.dispatch(self.conn, mv, parse_request_header(mv))
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        if result is None:
            return None
        header_version, parts = result
        return header_version, b"".join(_bytes(p) for p in parts)

    def call(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        """Encode, dispatch, check the response header version, decode with kio."""
        answer = self.raw(self.frame(api_key, version, self.request(api_key, version, values)))
        assert answer is not None
        header_version, body = answer
        assert header_version == response_header_version(api_key, version)
        return decode_response(api_key, version, body)

    def create(self, name: str, partitions: int = 1, **configs: str) -> None:
        r = self.call(ApiKey.CREATE_TOPICS, 7, {"topics": [{
            "name": name, "num_partitions": partitions, "replication_factor": 1,
            "assignments": [], "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
            "timeout": 30000, "validate_only": False})
        assert r.topics[0].error_code == 0, r

    def close(self) -> None:
        self.log_manager.close()
        self.quorum.close()


async def _await(result: Any) -> Any:
    return await result


def _bytes(part: Any) -> bytes:
    if isinstance(part, FileRegion):
        return os.pread(part.fd, part.size, part.position)
    return bytes(part)
