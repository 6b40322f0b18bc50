"""DescribeLogDirs' per-directory answer (issue 20, JBOD) over a real LogManager and
ReplicaManager: a moving replica's `-future` log is listed in its destination with its lag,
and an offline directory answers KAFKA_STORAGE_ERROR alone."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from odradek.broker.handlers.log_dirs import _describe_dir
from odradek.protocol.errors import ErrorCode
from odradek.replication.alter_log_dirs import copy_chunk
from odradek.replication.manager import ReplicaManager
from odradek.storage.log_dir_failure import channel_for
from odradek.storage.log_manager import LogManager
from tests.unit.storage.support import append_values, small_config


def _parts(result: dict) -> dict[tuple[str, int, bool], tuple[int, int]]:
    return {(t["name"], p["partition_index"], p["is_future_key"]):
            (p["partition_size"], p["offset_lag"])
            for t in result["topics"] for p in t["partitions"]}


def test_a_moving_replica_shows_its_future_log_and_lag(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    lm = LogManager(d0, small_config(), log_dirs=[d1])
    lm.load()
    rm = ReplicaManager(lm, 1, d0, lambda topic: small_config())
    current = lm.create("t", 0, uuid.uuid4())
    for i in range(10):
        append_values(current, [b"v%d" % i])
    future = lm.create_future("t", 0, d1)
    copy_chunk(current, future, 0)
    append_values(current, [b"late"])  # the copy is one batch behind now
    src, dst = _describe_dir(rm, d0, None), _describe_dir(rm, d1, None)
    assert src["log_dir"] == os.path.abspath(d0) and src["error_code"] == ErrorCode.none
    assert _parts(src) == {("t", 0, False): (current.size_bytes, 0)}
    assert _parts(dst) == {("t", 0, True): (future.size_bytes, 1)}
    assert dst["total_bytes"] > 0 and 0 <= dst["usable_bytes"] <= dst["total_bytes"]
    # asking for other partitions lists none
    assert _parts(_describe_dir(rm, d1, {("u", 0)})) == {}
    lm.close()


def test_an_offline_directory_answers_kafka_storage_error(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    lm = LogManager(d0, small_config(), log_dirs=[d1])
    lm.load()
    rm = ReplicaManager(lm, 1, d0, lambda topic: small_config())
    tid = uuid.uuid4()
    lm.create("t", 0, tid)
    lm.create("t", 1, tid)
    channel = channel_for(d1)
    channel.mark_offline("test: the disk failed")
    bad = _describe_dir(rm, d1, None)
    assert bad["error_code"] == ErrorCode.kafka_storage_error
    assert bad["topics"] == [] and bad["total_bytes"] == -1 and bad["usable_bytes"] == -1
    assert _describe_dir(rm, d0, None)["error_code"] == ErrorCode.none
    lm.close()
