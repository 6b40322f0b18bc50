"""Formatting a data directory, as `kafka-storage.sh format` does.

A formatted directory holds `meta.properties` (this node's id, the cluster id, the directory
id) and `bootstrap.checkpoint`: the metadata records the first active controller writes to an
empty metadata log (the finalized feature levels), in Kafka's snapshot file format (record
batches: a SnapshotHeader control record, the records, a SnapshotFooter control record).
A node with a quorum configured starts only from a formatted directory; a single node with
none formats itself at its first start.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from odradek.metadata.controller_features import FINALIZED_AT_BOOTSTRAP
from odradek.metadata.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    random_kafka_uuid,
    read_meta_properties,
    uuid_from_base64,
    uuid_to_base64,
    write_meta_properties,
)
from odradek.metadata.records import (
    FeatureLevelRecord,
    MetadataRecord,
    decode_record,
    encode_record,
)
from odradek.protocol.records import (
    ControlRecordType,
    Record,
    batch_crc_ok,
    build_batch,
    build_control_batch,
    decode_control_record,
    decode_records,
    iter_batches,
)

__all__ = [
    "BOOTSTRAP_CHECKPOINT",
    "BOOTSTRAP_FEATURES",
    "FormatError",
    "bootstrap_records",
    "check_cluster_id",
    "format_data_dir",
    "read_bootstrap_checkpoint",
    "write_bootstrap_checkpoint",
]

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
# The feature levels a new cluster starts with, the controller's (metadata.version, and
# transaction.version 2, so that Java 4.x clients use KIP-890's protocol).
BOOTSTRAP_FEATURES: tuple[tuple[str, int], ...] = tuple(FINALIZED_AT_BOOTSTRAP.items())
_HEADER_VALUE = struct.Struct(">hq")  # SnapshotHeaderRecord v0: version, last timestamp
_FOOTER_VALUE = struct.Struct(">h")  # SnapshotFooterRecord v0: version
_NO_TAGS = b"\x00"


class FormatError(Exception):
    """The directory cannot be formatted (the message is the one line the user sees)."""


def check_cluster_id(cluster_id: str) -> str:
    """A cluster id is a Kafka Uuid in base64url (22 characters), as random-uuid prints."""
    try:
        uuid_from_base64(cluster_id)
    except ValueError as exc:
        raise FormatError(f"Cluster ID string {cluster_id} does not appear to be a valid UUID: "
                          f"{exc}") from None
    return cluster_id


def bootstrap_records(features: Sequence[tuple[str, int]] = BOOTSTRAP_FEATURES,
                      ) -> list[MetadataRecord]:
    return [FeatureLevelRecord(name, level) for name, level in features]


def write_bootstrap_checkpoint(directory: Path, records: Sequence[MetadataRecord]) -> Path:
    """Write `bootstrap.checkpoint` atomically (temp file, fsync, rename)."""
    now = int(time.time() * 1000)
    header = build_control_batch(ControlRecordType.SNAPSHOT_HEADER, base_offset=0,
                                 partition_leader_epoch=0,
                                 value=_HEADER_VALUE.pack(0, now) + _NO_TAGS)
    body = build_batch([Record(-1, now, None, encode_record(r), ()) for r in records],
                       base_offset=1, partition_leader_epoch=0) if records else b""
    footer = build_control_batch(ControlRecordType.SNAPSHOT_FOOTER,
                                 base_offset=1 + len(records), partition_leader_epoch=0,
                                 value=_FOOTER_VALUE.pack(0) + _NO_TAGS)
    path = Path(directory) / BOOTSTRAP_CHECKPOINT
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(header + body + footer)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def read_bootstrap_checkpoint(directory: Path) -> list[MetadataRecord] | None:
    """The records of `bootstrap.checkpoint`; None when there is none. A damaged file raises
    FormatError (the CRCs are checked and the footer must be there)."""
    path = Path(directory) / BOOTSTRAP_CHECKPOINT
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    records: list[MetadataRecord] = []
    footer = False
    try:
        for header, batch in iter_batches(data, strict=True):
            if not batch_crc_ok(batch):
                raise ValueError(f"CRC mismatch in the batch at offset {header.base_offset}")
            for rec in decode_records(header, batch):
                if header.is_control:
                    if decode_control_record(rec).type == ControlRecordType.SNAPSHOT_FOOTER:
                        footer = True
                elif rec.value is not None:
                    records.append(decode_record(rec.value))
    except Exception as exc:
        raise FormatError(f"{path} is damaged: {exc}") from None
    if not footer:
        raise FormatError(f"{path} is damaged: no snapshot footer")
    return records


@dataclass(frozen=True, slots=True)
class Formatted:
    meta: MetaProperties
    created: bool  # False: it was formatted already for this cluster and node (ignored)


def format_data_dir(data_dir: Path, cluster_id: str, node_id: int, *,
                    ignore_formatted: bool = False,
                    features: Sequence[tuple[str, int]] = BOOTSTRAP_FEATURES,
                    extra_records: Sequence[MetadataRecord] = ()) -> Formatted:
    """Write meta.properties and bootstrap.checkpoint into `data_dir` (created if missing).

    A directory of another cluster or node is always refused; one already formatted for this
    cluster and node is refused unless `ignore_formatted` (kafka-storage.sh's rule).
    """
    check_cluster_id(cluster_id)
    data_dir = Path(data_dir)
    if data_dir.exists() and not data_dir.is_dir():
        raise FormatError(f"{data_dir} is not a directory")
    try:
        existing = read_meta_properties(data_dir)
    except (MetaPropertiesError, OSError) as exc:
        raise FormatError(f"{data_dir}: cannot read meta.properties: {exc}") from None
    if existing is not None:
        if existing.cluster_id != cluster_id:
            raise FormatError(f"Log directory {data_dir} belongs to cluster "
                              f"{existing.cluster_id}, not {cluster_id}: refusing to format it")
        if existing.node_id != node_id:
            raise FormatError(f"Log directory {data_dir} is formatted for node.id "
                              f"{existing.node_id}, not {node_id}: refusing to format it")
        if not ignore_formatted:
            raise FormatError(f"Log directory {data_dir} is already formatted. Use "
                              "--ignore-formatted to ignore this directory and format the "
                              "others.")
        return Formatted(existing, False)
    if data_dir.is_dir() and any(p.name not in (".lock",) for p in data_dir.iterdir()):
        # logs without meta.properties: a directory of something else, or of a node from
        # before meta.properties; formatting it would hand its logs to a new cluster
        raise FormatError(f"Log directory {data_dir} is not empty and has no meta.properties: "
                          "refusing to format it")
    meta = MetaProperties(cluster_id=cluster_id, node_id=node_id,
                          directory_id=uuid_to_base64(random_kafka_uuid()))
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        write_bootstrap_checkpoint(data_dir, [*bootstrap_records(features), *extra_records])
        # meta.properties last: a directory with it is a formatted one
        write_meta_properties(data_dir, meta)
    except OSError as exc:
        raise FormatError(f"cannot format {data_dir}: {exc.strerror or exc}") from None
    return Formatted(meta, True)
