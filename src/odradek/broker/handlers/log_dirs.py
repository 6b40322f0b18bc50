"""DescribeLogDirs (v1-4) and AlterReplicaLogDirs (v1-2): this node's log directories.

DescribeLogDirs answers one result per configured directory (Kafka: its absolute path):
the partitions in it with their size and offset lag (a moving replica's `-future` log is
listed with is_future_key and its lag behind the current log), and the file system's
total and usable bytes; an offline directory answers KAFKA_STORAGE_ERROR and nothing else.

AlterReplicaLogDirs moves replicas between this node's directories while they serve
(replication.alter_log_dirs), with Kafka's per-partition answers: LOG_DIR_NOT_FOUND for a
path that is not one of them, KAFKA_STORAGE_ERROR when a directory is offline,
REPLICA_NOT_AVAILABLE for a partition not hosted here (it is created in that directory
when it comes, as Kafka's preferred log dir).
"""

from __future__ import annotations

import os
from typing import Any

from odradek.broker import authz
from odradek.broker.handlers.common import Response, decode, respond
from odradek.metadata.acls import AclOperation
from odradek.protocol.apis import ApiKey, ApiVersionRange
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.storage.log_dir_failure import channel_for

VERSIONS = (
    ApiVersionRange(ApiKey.DESCRIBE_LOG_DIRS, 1, 4),  # v0: removed in Kafka 4, not in kio
    ApiVersionRange(ApiKey.ALTER_REPLICA_LOG_DIRS, 1, 2),  # v0: removed in Kafka 4
)

UNKNOWN_VOLUME_BYTES = -1


def _describe_dir(rm: Any, directory: Any, wanted: set[tuple[str, int]] | None) -> dict[str, Any]:
    lm = rm.log_manager
    path = os.path.abspath(directory)
    if channel_for(directory).offline:
        return {"error_code": ErrorCode.kafka_storage_error, "log_dir": path, "topics": [],
                "total_bytes": UNKNOWN_VOLUME_BYTES, "usable_bytes": UNKNOWN_VOLUME_BYTES}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    entries = [(k, lg, False) for k, lg in lm.logs_in(directory).items()]
    entries += [(k, lg, True) for k, lg in lm.futures_in(directory).items()]
    for (topic, index), lg, future in sorted(entries, key=lambda e: (e[0], e[2])):
        if wanted is not None and (topic, index) not in wanted:
            continue
        part = rm.partitions.get((topic, index))
        if future:
            current = lm.get(topic, index)
            lag = max(0, current.log_end_offset - lg.log_end_offset) if current else 0
        else:
            # Kafka's getLogEndOffsetLag: how far the log end is behind the high watermark
            lag = max(0, part.high_watermark - lg.log_end_offset) if part is not None else 0
        by_topic.setdefault(topic, []).append({
            "partition_index": index, "partition_size": int(lg.size_bytes),
            "offset_lag": int(lag), "is_future_key": future})
    try:
        st = os.statvfs(directory)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = usable = UNKNOWN_VOLUME_BYTES
    return {"error_code": ErrorCode.none, "log_dir": path,
            "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
            "total_bytes": total, "usable_bytes": usable}


def handle_describe_log_dirs(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    if not authz.cluster_allowed(ctx, header, AclOperation.DESCRIBE):
        return respond(header, {"throttle_time": 0,
                                "error_code": ErrorCode.cluster_authorization_failed,
                                "results": []})
    rm = ctx.replica_manager
    wanted = None
    if req.topics is not None:
        wanted = {(t.topic, int(p)) for t in req.topics for p in t.partitions}
    results = [_describe_dir(rm, d, wanted) for d in rm.log_manager.log_dirs]
    return respond(header, {"throttle_time": 0, "error_code": ErrorCode.none,
                            "results": results})


def _alter_one(rm: Any, destination: Any, path: str, topic: str, index: int) -> ErrorCode:
    lm = rm.log_manager
    if len(f"{topic}-{index}.{'0' * 32}-future") > 255:
        # Kafka: the future log's directory name would not fit (KAFKA-4893)
        return ErrorCode.invalid_topic_exception
    if destination is None:
        return ErrorCode.log_dir_not_found
    if channel_for(destination).offline:
        return ErrorCode.kafka_storage_error
    part = rm.partitions.get((topic, index))
    if part is None:
        # created there when this node gets it (Kafka's maybeUpdatePreferredLogDir)
        lm.set_preferred_dir(topic, index, destination)
        return ErrorCode.replica_not_available
    if channel_for(lm.dir_of(part.log)).offline:
        return ErrorCode.kafka_storage_error
    moves = rm.alter_log_dirs
    future = lm.futures.get((topic, index))
    if future is not None and future.dir.parent != destination:
        moves.cancel((topic, index))  # the last request wins
    if lm.dir_of(part.log) == destination:
        return ErrorCode.none  # already there (and any move elsewhere cancelled)
    if lm.offline_dirs():
        # Kafka creates no future log while a directory is offline
        return ErrorCode.kafka_storage_error
    try:
        moves.start(part, destination)
    except KafkaError as exc:
        return exc.code
    except OSError:
        return ErrorCode.kafka_storage_error
    return ErrorCode.none


def handle_alter_replica_log_dirs(ctx: Any, header: Any, frame: memoryview) -> Response:
    req = decode(header, frame)
    allowed = authz.cluster_allowed(ctx, header, AclOperation.ALTER)
    rm = ctx.replica_manager
    results: dict[str, list[dict[str, Any]]] = {}
    for d in req.dirs:
        path = str(d.path)
        # Kafka: the path must be absolute and one of log.dirs
        destination = rm.log_manager.find_dir(path) if os.path.isabs(path) else None
        for t in d.topics:
            for p in t.partitions:
                if not allowed:
                    code = ErrorCode.cluster_authorization_failed
                else:
                    code = _alter_one(rm, destination, path, str(t.name), int(p))
                results.setdefault(str(t.name), []).append(
                    {"partition_index": int(p), "error_code": code})
    return respond(header, {"throttle_time": 0, "results": [
        {"topic_name": name, "partitions": parts} for name, parts in results.items()]})
