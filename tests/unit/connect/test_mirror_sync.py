"""MirrorMaker 2's bookkeeping (connect/connectors/mirror_sync): replication policies and
filters, its internal topics' record formats, the offset-sync rule and the OffsetSyncStore's
conservative translation (a group moved by it never skips a record)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.connect.connectors.mirror_sync import (
    DEFAULT_POLICY,
    GROUPS_EXCLUDE,
    IDENTITY_POLICY,
    TOPICS_EXCLUDE,
    Checkpoint,
    Heartbeat,
    NameFilter,
    OffsetSync,
    OffsetSyncStore,
    PartitionState,
    ReplicationPolicy,
    replicated,
)


def test_policies_name_remote_and_internal_topics() -> None:
    default = ReplicationPolicy(DEFAULT_POLICY)
    assert default.format_remote_topic("us", "orders") == "us.orders"
    assert default.topic_source("us.orders") == "us"
    assert default.topic_source("orders") is None
    assert default.offset_syncs_topic("eu") == "mm2-offset-syncs.eu.internal"
    assert default.checkpoints_topic("us") == "us.checkpoints.internal"
    identity = ReplicationPolicy(IDENTITY_POLICY)
    assert identity.format_remote_topic("us", "orders") == "orders"
    assert identity.format_remote_topic("us", "heartbeats") == "us.heartbeats"
    assert identity.topic_source("a.b") is None
    assert ReplicationPolicy(DEFAULT_POLICY, "_").format_remote_topic("us", "t") == "us_t"


def test_filters_follow_mm2_defaults() -> None:
    topics = NameFilter.of("orders.*, pay", TOPICS_EXCLUDE)
    policy = ReplicationPolicy()
    assert replicated("orders-1", topics, policy, "eu")
    assert replicated("pay", topics, policy, "eu")
    assert not replicated("payments", topics, policy, "eu")  # regexes match the whole name
    assert not replicated("orders.internal", topics, policy, "eu")
    assert not replicated("__consumer_offsets", NameFilter.of(".*", TOPICS_EXCLUDE), policy, "eu")
    assert not replicated("mm2-offset-syncs.eu.internal", NameFilter.of(".*", ""), policy, "eu")
    # a topic that came from the target would loop back: never copied
    assert not replicated("eu.orders", NameFilter.of(".*", ""), policy, "eu")
    assert replicated("heartbeats", NameFilter.of("none", ""), policy, "eu")
    groups = NameFilter.of(".*", GROUPS_EXCLUDE)
    assert groups("app") and not groups("connect-lake") and not groups("console-consumer-1")


def test_record_formats_are_kafka_structs() -> None:
    sync = OffsetSync("orders", 2, 100, 57)
    assert sync.key() == b"\x00\x06orders" + struct.pack(">i", 2)
    assert sync.value() == struct.pack(">qq", 100, 57)
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    cp = Checkpoint("app", "us.orders", 1, 10, 8, "meta")
    assert cp.key() == b"\x00\x03app\x00\x09us.orders" + struct.pack(">i", 1)
    assert cp.value() == struct.pack(">hqq", 0, 10, 8) + b"\x00\x04meta"
    assert Checkpoint.decode(cp.key(), cp.value()) == cp
    beat = Heartbeat("us", "eu", 1_700_000_000_000)
    assert beat.value() == struct.pack(">hq", 0, 1_700_000_000_000)
    assert Heartbeat.decode(beat.key(), beat.value()) == beat
    with pytest.raises(ValueError):
        Checkpoint.decode(cp.key(), struct.pack(">h", 1) + cp.value()[2:])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=40))
def test_decoders_take_any_bytes(key: bytes, value: bytes) -> None:
    for kind in (OffsetSync, Checkpoint, Heartbeat):
        try:
            kind.decode(key, value)  # type: ignore[attr-defined]
        except ValueError:
            pass


def test_sync_rule() -> None:
    state = PartitionState(max_lag=3)
    assert state.update(0, 0)  # first of this task's life
    assert not state.update(1, 1)
    assert not state.update(2, 2)
    assert not state.update(3, 3)
    assert state.update(4, 4)  # 4 - (0 + 1) >= 3: too stale
    assert state.update(6, 5)  # upstream skipped 5
    assert state.update(7, 2)  # downstream went back (truncated)
    assert not state.update(8, 3)
    assert state.promote() == (8, 3)
    assert state.promote() is None


def test_translation_is_mm2s() -> None:
    store = OffsetSyncStore()
    store.add(OffsetSync("t", 0, 10, 5))
    assert store.translate("t", 0, 12) is None  # not read to the end yet
    store.read_to_end = True
    assert store.translate("t", 0, 10) == 5  # exactly at a sync
    assert store.translate("t", 0, 30) == 6  # past it: one past the sync, no further
    assert store.translate("t", 0, 9) == -1  # before every sync kept
    assert store.translate("t", 1, 10) is None
    store.add(OffsetSync("t", 0, 20, 15))
    assert store.translate("t", 0, 20) == 15 and store.translate("t", 0, 19) == 6
    store.add(OffsetSync("t", 0, 3, 100))  # upstream went back: only the newest counts
    assert store.translate("t", 0, 10) == 101


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=300),
       st.integers(0, 20), st.data())
def test_a_translated_group_misses_nothing(steps: list[tuple[int, bool]], max_lag: int,
                                           data: st.DataObject) -> None:
    """Upstream offsets with gaps (compaction, markers), some records not replicated at all;
    syncs by MM2's rule and at batch ends. For every group position g the translated offset
    is at or before the first downstream record at or after g (nothing skipped)."""
    state, store = PartitionState(max_lag), OffsetSyncStore()
    store.read_to_end = True
    pairs: list[tuple[int, int]] = []  # (upstream, downstream) of replicated records
    upstream, downstream = -1, 0
    for gap, copied in steps:
        upstream += gap
        if not copied:
            continue
        pairs.append((upstream, downstream))
        if state.update(upstream, downstream):
            store.add(OffsetSync("t", 0, upstream, downstream))
        if data.draw(st.booleans()):  # a batch ended
            pair = state.promote()
            if pair is not None:
                store.add(OffsetSync("t", 0, *pair))
        downstream += 1
    for g in range(0, upstream + 3):
        got = store.translate("t", 0, g)
        if got is None or got < 0:
            continue
        first = next((d for u, d in pairs if u >= g), downstream)
        assert got <= first, (g, got, first)
