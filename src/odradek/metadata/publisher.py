"""The committed metadata image of this node, built from what the quorum commits.

Every node (controller, broker, or both) has one `MetadataPublisher`. The quorum calls
`on_commit(batch)` for every committed batch, in offset order, exactly once each; the
publisher replays the batch into a `MetadataDelta`, swaps in the new image, and calls its
listeners with `(delta, image)`. The controller decides from `publisher.image` only: it never
applies its own records, so what it reads is exactly what every other node reads.

After the quorum loads a snapshot (KIP-630) it sends one notice in place of a record: an
object with a `records` attribute (h14raft's `SnapshotLoaded`) holding the whole image as
metadata records. The publisher then rebuilds the image from nothing; the delta it hands its
listeners compares the new image with the old one (see `_snapshot_delta`).

Sans-I/O: no asyncio here. The quorum calls `on_commit` on the node's loop; the lock only
guards the swap against a reader in a worker thread seeing half an update (it never does:
the image is one reference), and lets the legacy single-voter quorum, which has no commit
listeners, publish from the controller's thread (`Controller._commit`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from odradek.metadata.image import MetadataDelta, MetadataImage, image_to_records
from odradek.metadata.records import MetadataRecord

__all__ = ["MetadataPublisher", "PublisherListener", "is_snapshot_notice"]

log = logging.getLogger(__name__)

PublisherListener = Callable[[MetadataDelta, MetadataImage], None]


def is_snapshot_notice(item: Any) -> bool:
    """A loaded-snapshot notice: not a metadata record, and carries the image's records."""
    return not isinstance(item, MetadataRecord) and hasattr(item, "records")


class MetadataPublisher:
    def __init__(self, cluster_id: str | None = None, image: MetadataImage | None = None) -> None:
        self.cluster_id = cluster_id
        self._image = image if image is not None else MetadataImage(cluster_id=cluster_id)
        self._listeners: list[PublisherListener] = []
        self._lock = threading.RLock()
        self.batches = 0  # batches published, for tests and status

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def offset(self) -> int:
        """Offset of the last record in the image, -1 when empty."""
        return self._image.offset

    def add_listener(self, fn: PublisherListener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: PublisherListener) -> None:
        self._listeners.remove(fn)

    def attach(self, quorum: Any) -> None:
        """Follow the quorum's commits (a quorum without commit listeners is published to by
        the controller instead), and be the source of its snapshots (KRaftQuorum writes one
        only when every commit listener has heard up to its high watermark, so the image is
        exactly the log up to the snapshot's offset)."""
        add = getattr(quorum, "add_commit_listener", None)
        if add is not None:
            add(self.on_commit)
        set_source = getattr(quorum, "set_snapshot_source", None)
        if set_source is not None:
            set_source(self.snapshot_records)

    def snapshot_records(self) -> list[MetadataRecord]:
        """The current image as the records of a snapshot (image.image_to_records)."""
        return image_to_records(self._image)

    def load(self, quorum: Any) -> MetadataImage:
        """Replay what the quorum has committed past the image (the start of a node whose
        quorum does not push its recovered log through the commit listener)."""
        batch: list[tuple[int, MetadataRecord]] = []
        quorum.replay(lambda offset, record: batch.append((offset, record)),
                      self._image.offset + 1)
        if batch:
            self.on_commit(batch)
        return self._image

    def on_commit(self, batch: Sequence[tuple[int, Any]]) -> MetadataDelta | None:
        """Apply one committed batch: [(offset, record or snapshot notice), ...]."""
        if not batch:
            return None
        with self._lock:
            before = self._image
            delta = MetadataDelta(before)
            last = floor = before.offset
            for offset, item in batch:
                if is_snapshot_notice(item):
                    delta = self._snapshot_delta(before, delta, item.records)
                    last = floor = offset
                    continue
                if offset <= floor:
                    # already in the image (a replay overlapping a commit notice); records of
                    # one batch may share an offset (a quorum replaying its snapshot gives
                    # them all the snapshot's last offset)
                    continue
                delta.replay(item)
                last = max(last, offset)
            if last == before.offset and delta.records == 0:
                return None
            image = delta.apply(last)
            self._image = image
            self.batches += 1
        for fn in list(self._listeners):
            try:
                fn(delta, image)
            except Exception:  # a listener's bug must not undo a committed change
                log.exception("metadata listener %r failed", fn)
        return delta

    def _snapshot_delta(self, before: MetadataImage, delta: MetadataDelta,
                        records: Iterable[MetadataRecord]) -> MetadataDelta:
        """A fresh image from the snapshot's records; the delta is marked with everything
        that differs from `before`, so listeners (the replica manager) see created, deleted
        and changed topics as after a run of records."""
        fresh = MetadataDelta(MetadataImage(cluster_id=before.cluster_id))
        # every map is owned by the delta, so apply() takes nothing from `before`
        fresh._topic_map()
        fresh._broker_map()
        fresh._configs = {}
        fresh._features = {}
        for record in records:
            fresh.replay(record)
        fresh.prev = before
        new_topics = dict(fresh._topic_map())
        for tid, parts in fresh._partitions.items():
            if tid in new_topics:
                new_topics[tid] = type(new_topics[tid])(new_topics[tid].name, tid, parts)
        fresh.created_topics = {t.name: tid for tid, t in new_topics.items()
                                if tid not in before.topics_by_id}
        fresh.deleted_topics = {t.name: t for tid, t in before.topics_by_id.items()
                                if tid not in new_topics}
        fresh.removed_topic_ids = set(fresh.removed_topic_ids) | {
            tid for tid in before.topics_by_id if tid not in new_topics}
        fresh.created_partitions = {(t.name, p) for tid, t in new_topics.items()
                                    if tid not in before.topics_by_id for p in t.partitions}
        changed = set()
        for tid, t in new_topics.items():
            old = before.topics_by_id.get(tid)
            if old is None:
                continue
            for p, part in t.partitions.items():
                if old.partitions.get(p) != part:
                    if p in old.partitions:
                        changed.add((t.name, p))
                    else:
                        fresh.created_partitions.add((t.name, p))
        fresh.changed_partitions = changed
        fresh.changed_brokers = set(before.brokers) | set(fresh._broker_map())
        fresh.changed_configs = set(before.configs) | set(fresh._configs or {})
        fresh.changed_features = set(before.features) | set(fresh._features or {})
        return fresh
