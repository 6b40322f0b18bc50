"""The committed image for a node without a metadata publisher, and its snapshot source.

The records of a snapshot come from `image.image_to_records` (one place: when the image gains
state, it gains the records for it; tests/unit/metadata/test_kraft_snapshot_image.py replays
every field back).
"""

from __future__ import annotations

from typing import Any

from odradek.metadata.image import MetadataImage, image_to_records
from odradek.metadata.quorum import SnapshotLoaded
from odradek.metadata.records import (
    MetadataRecord,
)

__all__ = ["ImageFollower"]


class ImageFollower:
    """A commit listener that keeps the committed image, and the quorum's snapshot source.

    For a node without a metadata publisher: `quorum.add_commit_listener(follower)` then
    `quorum.set_snapshot_source(follower.snapshot_records)`. A publisher that keeps the image
    anyway is the better source (one replay, not two)."""

    def __init__(self, cluster_id: str | None) -> None:
        self.cluster_id = cluster_id
        self.image = MetadataImage(cluster_id=cluster_id)

    def __call__(self, batch: list[tuple[int, Any]]) -> None:
        records = []
        for offset, item in batch:
            if isinstance(item, SnapshotLoaded):
                self.image = MetadataImage(cluster_id=self.cluster_id).apply(item.records, offset)
            else:
                records.append(item)
        if records:
            self.image = self.image.apply(records, batch[-1][0])

    def snapshot_records(self) -> list[MetadataRecord]:
        return image_to_records(self.image)
