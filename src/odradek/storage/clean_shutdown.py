"""The clean-shutdown marker of a log directory (Kafka's `.kafka_cleanshutdown`, KIP-966).

A broker writes it into each online log directory once every log there is flushed and
checkpointed at the end of a clean stop, holding its broker epoch. At the next start the
broker reads it before registering: the epoch is sent as BrokerRegistration's
PreviousBrokerEpoch only when every log directory holds a marker with the same epoch;
otherwise (-1) the controller takes the start as following an unclean shutdown, and the
broker leaves every ISR until it has caught up again (what only the page cache held may be
gone from its disk). The markers are removed right after they are read, before anything is
written: a crash of this run leaves none behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from odradek.storage.checkpoints import atomic_write, fsync_dir

__all__ = ["CLEAN_SHUTDOWN_FILE", "clear_markers", "previous_broker_epoch", "write_marker"]

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0
NO_EPOCH = -1


def write_marker(directory: Path, broker_epoch: int) -> bool:
    """Mark `directory` as cleanly shut down by the broker of `broker_epoch`; False (and
    one line) when it cannot be written: the next start then counts as unclean."""
    body = json.dumps({"version": _VERSION, "brokerEpoch": int(broker_epoch)}).encode()
    try:
        atomic_write(directory / CLEAN_SHUTDOWN_FILE, body)
    except OSError as exc:
        log.warning("%s: clean shutdown marker not written (%s): the next start counts as "
                    "unclean", directory, exc)
        return False
    return True


def _read(directory: Path) -> int | None:
    try:
        content = json.loads((directory / CLEAN_SHUTDOWN_FILE).read_bytes())
        return int(content["brokerEpoch"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("%s: unreadable clean shutdown marker (%s)", directory, exc)
        return None


def previous_broker_epoch(directories: Sequence[Path]) -> int:
    """The broker epoch of the last clean shutdown, or -1 unless every directory holds a
    marker with that same epoch (Kafka's readBrokerEpochFromCleanShutdownFiles)."""
    epochs = {_read(d) for d in directories}
    if not directories or None in epochs or len(epochs) != 1:
        return NO_EPOCH
    (epoch,) = epochs
    return NO_EPOCH if epoch is None else epoch


def clear_markers(directories: Sequence[Path]) -> None:
    """Remove the markers (durably) before this run writes anything."""
    for directory in directories:
        try:
            os.unlink(directory / CLEAN_SHUTDOWN_FILE)
        except FileNotFoundError:
            continue
        except OSError as exc:  # nothing can be written there either: its logs go offline
            log.warning("%s: clean shutdown marker not removed (%s)", directory, exc)
            continue
        with contextlib.suppress(OSError):
            fsync_dir(directory)
