"""A node's log directories (`log.dirs`, JBOD): which they are, their identity, their health.

The data directory (`--data-dir`) holds the metadata log and is always the first log
directory (Kafka's metadata.log.dir defaults to the first of log.dirs); `log.dirs` adds
the others. Each gets its own meta.properties with the node's cluster.id and node.id and
its own directory.id, as Kafka 3.7+ writes them; the ids go to the controller in the
broker's registration (BrokerRegistration's log_dirs).

A directory that fails (an I/O error on a write, fsync or checkpoint; unreadable at
start) goes offline alone: its partitions answer KAFKA_STORAGE_ERROR and the node serves
the others. The node stops only when the data directory (the metadata log's) fails or
no directory is left online, as Kafka's broker does.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from odradek.broker.startup import StartRefused
from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.meta_properties import (
    MetaProperties,
    MetaPropertiesError,
    ensure_meta_properties,
    uuid_from_base64,
)
from odradek.storage.log_dir_failure import channel_for

log = logging.getLogger("odradek.node")

# the io quota of replica moves between log directories (dynamic: read at every chunk)
MOVE_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"

__all__ = ["MOVE_RATE", "directory_ids", "log_dirs_of", "prepare_log_dirs", "stop_watching", "watch_log_dirs"]


def log_dirs_of(data_dir: Path, config: BrokerConfig) -> list[Path]:
    """The data directory, then each `log.dirs` entry not the same directory."""
    dirs = [Path(data_dir)]
    seen = {os.path.realpath(data_dir)}
    if config.is_set("log.dirs"):
        for entry in config.log_dirs:
            for part in entry.split(","):
                part = part.strip()
                if part and os.path.realpath(part) not in seen:
                    seen.add(os.path.realpath(part))
                    dirs.append(Path(part))
    return dirs


def prepare_log_dirs(dirs: list[Path], meta: MetaProperties) -> dict[Path, str]:
    """meta.properties in every log directory after the first (formatted on first use with
    the data directory's cluster.id and node.id). Returns each usable directory's id. One
    that belongs to another cluster or node refuses the start (Kafka); one that cannot be
    created or read goes offline, the node starts with the others."""
    ids: dict[Path, str] = {}
    if meta.directory_id:
        ids[dirs[0]] = meta.directory_id
    for directory in dirs[1:]:
        try:
            other = ensure_meta_properties(directory, meta.node_id, meta.cluster_id)
        except MetaPropertiesError as exc:
            raise StartRefused(f"log directory {directory}: {exc}") from None
        except OSError as exc:
            log.error("log directory %s is unusable (%s): offline; its partitions are not "
                      "served", directory, exc.strerror or exc)
            channel_for(directory).mark_offline(f"unusable at start: {exc.strerror or exc}")
            continue
        if other.directory_id in ids.values():
            raise StartRefused(f"log directory {directory} has the directory.id of another "
                               f"log directory ({other.directory_id}): a copied directory?")
        ids[directory] = other.directory_id or ""
    return ids


def directory_ids(ids: dict[Path, str]) -> list[uuid.UUID]:
    """The directory ids as Uuids, for BrokerRegistration's log_dirs."""
    out = []
    for text in ids.values():
        try:
            out.append(uuid_from_base64(text))
        except ValueError:
            continue
    return out


def watch_log_dirs(dirs: list[Path], config: BrokerConfig,
                   stop_node: Callable[[str], None]) -> None:
    """Free-space monitors on every directory, and what a failure does: the data directory
    (the metadata log's) or the last online one stops the node; another only takes its own
    partitions offline (the channel has said which and why)."""
    floor = config.get_int("log.dir.free.space.min.bytes")

    def failed(directory: Path, why: str) -> None:
        if all(channel_for(d).offline for d in dirs):
            stop_node("no log directory is online")
        elif os.path.realpath(directory) == os.path.realpath(dirs[0]):
            stop_node(f"the data directory {directory} (metadata log) failed")
        else:
            log.error("log directory %s is offline (%s): only its partitions are offline; "
                      "the node serves those of the other directories", directory, why)

    for directory in dirs:
        state = channel_for(directory)
        state.min_free_bytes = floor
        state.add_offline_listener(failed)
        if not state.offline:
            state.start_monitor()


def stop_watching(dirs: list[Path]) -> None:
    for directory in dirs:
        channel_for(directory).stop_monitor()
