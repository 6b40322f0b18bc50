"""`odradek storage verify`'s checks of the metadata log (`__cluster_metadata-0`).

Storage scans it as any log (storage/verify.py); here, what only the metadata package knows:
every record decodes as a metadata record, and the good batches reach the commit marker's
offset (damage below it stops the node; a torn tail past it is cut at the next start).
"""

from __future__ import annotations

from pathlib import Path

from odradek.metadata.quorum import (
    COMMIT_MARKER,
    METADATA_LOG_DIR,
    CommitMarker,
    MetadataLogDamaged,
)
from odradek.metadata.records import decode_record
from odradek.protocol.records import BatchHeader, decode_records
from odradek.storage.verify import LogChecks, Report
from odradek.storage.verify import verify_data_dir as verify_logs

__all__ = ["METADATA_LOG_CHECKS", "check_metadata_batch", "verify_commit_marker",
           "verify_data_dir"]


def check_metadata_batch(batch: bytes) -> str | None:
    """A finding when a record of the batch does not decode as a metadata record."""
    header = BatchHeader.parse(memoryview(batch))
    if header.is_control:
        return None
    try:
        for rec in decode_records(header, batch):
            if rec.value is not None:
                decode_record(rec.value)
    except Exception as exc:  # any decoding failure is a finding, not a crash of the tool
        return f"a record does not decode as metadata ({exc})"
    return None


def verify_commit_marker(path: Path, report: Report) -> None:
    marker = path / COMMIT_MARKER
    try:
        found = CommitMarker.read(marker)
    except MetadataLogDamaged as exc:
        report.bad(str(exc))
        return
    if found is None:
        report.note(f"{marker}: absent (a data directory from before the marker)")
        return
    _, committed, _ = found
    _, good_end = report.ends.get(path.name, (0, 0))
    if good_end < committed:
        report.bad(f"{path}: the good batches end at offset {good_end}, below the committed "
                   f"offset {committed}: the node will not start (restore the metadata log, "
                   f"or delete {marker} to accept losing the metadata from offset {good_end})")
    elif any(line.startswith(str(path)) for line in report.damage):
        report.note(f"{path}: the damage lies past the committed offset {committed}: a torn "
                    f"tail never committed, cut at the next start")



METADATA_LOG_CHECKS = {METADATA_LOG_DIR: LogChecks(check_metadata_batch, verify_commit_marker)}


def verify_data_dir(data_dir: Path) -> Report:
    """Every log of the directory (storage's checks), the metadata log's own on top."""
    return verify_logs(data_dir, METADATA_LOG_CHECKS)
