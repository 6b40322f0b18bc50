"""The clean-shutdown marker (Kafka's .kafka_cleanshutdown, KIP-966): what the next start
registers as its previous broker epoch."""

from __future__ import annotations

import json
from pathlib import Path

from odradek.storage.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    clear_markers,
    previous_broker_epoch,
    write_marker,
)


def dirs(tmp_path: Path, n: int) -> list[Path]:
    out = [tmp_path / f"d{i}" for i in range(n)]
    for d in out:
        d.mkdir()
    return out


def test_marker_in_every_dir_gives_its_epoch(tmp_path: Path) -> None:
    ds = dirs(tmp_path, 2)
    for d in ds:
        assert write_marker(d, 4242)
    assert json.loads((ds[0] / CLEAN_SHUTDOWN_FILE).read_text()) == {
        "version": 0, "brokerEpoch": 4242}
    assert previous_broker_epoch(ds) == 4242


def test_no_marker_or_one_missing_or_different_means_unclean(tmp_path: Path) -> None:
    ds = dirs(tmp_path, 2)
    assert previous_broker_epoch(ds) == -1  # a first start, or a crash
    write_marker(ds[0], 7)
    assert previous_broker_epoch(ds) == -1  # one directory did not close cleanly
    write_marker(ds[1], 8)
    assert previous_broker_epoch(ds) == -1  # epochs disagree
    assert previous_broker_epoch([]) == -1


def test_an_unreadable_marker_means_unclean(tmp_path: Path) -> None:
    [d] = dirs(tmp_path, 1)
    (d / CLEAN_SHUTDOWN_FILE).write_text("{not json")
    assert previous_broker_epoch([d]) == -1
    (d / CLEAN_SHUTDOWN_FILE).write_text('{"version": 0}')
    assert previous_broker_epoch([d]) == -1


def test_cleared_markers_make_the_next_start_unclean(tmp_path: Path) -> None:
    ds = dirs(tmp_path, 2)
    for d in ds:
        write_marker(d, 11)
    clear_markers(ds)
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in ds)
    assert previous_broker_epoch(ds) == -1
    clear_markers(ds)  # nothing to remove: no error


def test_a_directory_that_cannot_be_written_gets_no_marker(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    assert not write_marker(gone, 3)
    assert previous_broker_epoch([gone]) == -1
