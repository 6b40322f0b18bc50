"""`meta.properties`: the identity of a log directory, as Kafka's KRaft mode writes it.

version=1, cluster.id (a 22-character base64url Kafka Uuid), node.id and directory.id.
A directory formatted for one node id refuses to start as another.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from odradek.metadata.config.java_properties import parse_properties

__all__ = [
    "META_PROPERTIES",
    "MetaProperties",
    "MetaPropertiesError",
    "ensure_meta_properties",
    "random_kafka_uuid",
    "read_meta_properties",
    "uuid_from_base64",
    "uuid_to_base64",
    "write_meta_properties",
]

META_PROPERTIES = "meta.properties"

# Kafka reserves the all-zero id and 1 (the metadata topic's id); ids never start with '-'
# so that they cannot be mistaken for command-line options.
_RESERVED = {uuid.UUID(int=0), uuid.UUID(int=1)}


class MetaPropertiesError(ValueError):
    """meta.properties is malformed or belongs to another node/cluster."""


def uuid_to_base64(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def uuid_from_base64(text: str) -> uuid.UUID:
    if len(text) != 22:
        raise ValueError(f"not a 22-character base64url Kafka Uuid: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a base64url Kafka Uuid: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a base64url Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    while True:
        value = uuid.uuid4()
        if value not in _RESERVED and not uuid_to_base64(value).startswith("-"):
            return value


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = 1

    def to_text(self) -> str:
        lines = [
            "#",
            f"#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}",
            f"node.id={self.node_id}",
        ]
        if self.directory_id is not None:
            lines.append(f"directory.id={self.directory_id}")
        lines += [f"version={self.version}", f"cluster.id={self.cluster_id}"]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_text(cls, text: str, where: str = META_PROPERTIES) -> MetaProperties:
        props = parse_properties(text)
        try:
            version = int(props.get("version", ""))
        except ValueError:
            raise MetaPropertiesError(f"{where}: missing or bad version") from None
        if version != 1:
            raise MetaPropertiesError(f"{where}: unsupported version {version} (KRaft needs 1)")
        cluster_id = props.get("cluster.id")
        if not cluster_id:
            raise MetaPropertiesError(f"{where}: cluster.id is missing")
        try:
            node_id = int(props.get("node.id", ""))
        except ValueError:
            raise MetaPropertiesError(f"{where}: missing or bad node.id") from None
        return cls(cluster_id, node_id, props.get("directory.id"), version)


def read_meta_properties(log_dir: Path) -> MetaProperties | None:
    path = Path(log_dir) / META_PROPERTIES
    try:
        text = path.read_text(encoding="latin-1")
    except FileNotFoundError:
        return None
    return MetaProperties.from_text(text, str(path))


def write_meta_properties(log_dir: Path, props: MetaProperties) -> None:
    """Write atomically: temp file, fsync, rename, fsync of the directory."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    tmp = log_dir / (META_PROPERTIES + ".tmp")
    with open(tmp, "w", encoding="latin-1") as fh:
        fh.write(props.to_text())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, log_dir / META_PROPERTIES)
    dir_fd = os.open(log_dir, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def ensure_meta_properties(
    log_dir: Path, node_id: int, cluster_id: str | None = None
) -> MetaProperties:
    """Return the directory's identity, formatting it on first start.

    A stored node id different from `node_id`, or a stored cluster id different from a given
    `cluster_id`, is refused as Kafka refuses it.
    """
    existing = read_meta_properties(log_dir)
    if existing is None:
        props = MetaProperties(
            cluster_id=cluster_id or uuid_to_base64(random_kafka_uuid()),
            node_id=node_id,
            directory_id=uuid_to_base64(random_kafka_uuid()),
        )
        write_meta_properties(log_dir, props)
        return props
    if existing.node_id != node_id:
        raise MetaPropertiesError(
            f"Stored node id {existing.node_id} doesn't match configured node id {node_id} "
            f"in {Path(log_dir) / META_PROPERTIES}"
        )
    if cluster_id is not None and existing.cluster_id != cluster_id:
        raise MetaPropertiesError(
            f"Stored cluster id {existing.cluster_id} doesn't match {cluster_id} "
            f"in {Path(log_dir) / META_PROPERTIES}"
        )
    if existing.directory_id is None:
        existing = MetaProperties(
            existing.cluster_id, existing.node_id, uuid_to_base64(random_kafka_uuid())
        )
        write_meta_properties(log_dir, existing)
    return existing
