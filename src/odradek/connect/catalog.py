"""The connectors this worker offers (`GET /connector-plugins`)."""

from __future__ import annotations

from odradek.connect.connectors.file_stream import FileStreamSink, FileStreamSource
from odradek.connect.connectors.jdbc_sink import JdbcSink
from odradek.connect.connectors.jdbc_source import JdbcSource
from odradek.connect.connectors.lake import LakeSink
from odradek.connect.connectors.mirror import MirrorCheckpoint, MirrorHeartbeat, MirrorSource
from odradek.connect.connectors.pg_cdc import PgCdc
from odradek.connect.plugins import Plugins


def default_plugins() -> Plugins:
    return Plugins([FileStreamSource(), FileStreamSink(), LakeSink(), JdbcSink(),
                    JdbcSource(), MirrorSource(), MirrorCheckpoint(), MirrorHeartbeat(),
                    PgCdc()])
