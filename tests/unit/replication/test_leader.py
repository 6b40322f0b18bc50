"""The leader's rules without sockets: follower log end offsets from fetches, the high
watermark (min LEO of the maximal ISR, never back, frozen below min.insync.replicas), ISR
expansion and shrink through alter_isr, and how the controller's answers are taken."""

from __future__ import annotations

from pathlib import Path

from odradek.protocol.errors import ErrorCode

from .support import append, leader_partition, now_ms, open_log


def test_becoming_leader_records_the_epoch_at_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    part = leader_partition(log, epoch=1, replicas=[1], isr=[1])
    append(part, 3)
    assert part.solo and part.high_watermark == 3
    part.make_leader(4, 1, [1, 2], [1, 2], now_ms())
    assert log.epochs.entries == [(1, 0), (4, 3)]
    assert not part.solo and part.leader_epoch == 4
    append(part)
    assert log.epochs.end_offset_for(1) == (1, 3)


def test_hw_is_min_leo_of_isr_and_never_goes_back(tmp_path: Path) -> None:
    part = leader_partition(open_log(tmp_path))
    append(part, 5)
    assert part.high_watermark == 0  # the followers have not fetched yet
    t = now_ms()
    assert part.update_follower_fetch(2, 3, t) is None
    assert part.high_watermark == 0  # 3 has not fetched
    part.update_follower_fetch(3, 4, t)
    assert part.high_watermark == 3
    part.update_follower_fetch(2, 5, t)
    assert part.high_watermark == 4
    # a fetch from an older position (a restarted follower) does not move the HW back
    part.update_follower_fetch(2, 1, t)
    assert part.high_watermark == 4


def test_hw_does_not_advance_below_min_insync_replicas(tmp_path: Path) -> None:
    part = leader_partition(open_log(tmp_path, min_isr=2), replicas=[1, 2, 3], isr=[1])
    append(part, 2)
    assert part.high_watermark == 0  # KIP-966: an ISR of 1 < min.insync.replicas=2
    part.update_isr([1, 2], 1)
    assert part.high_watermark == 0
    part.update_follower_fetch(2, 2, now_ms())
    assert part.high_watermark == 2


def test_isr_of_leader_alone_commits_at_once_with_min_isr_one(tmp_path: Path) -> None:
    part = leader_partition(open_log(tmp_path), replicas=[1, 2], isr=[1])
    append(part, 2)
    assert part.high_watermark == 2


def test_unknown_replica_and_non_leader_get_not_leader_or_follower(tmp_path: Path) -> None:
    part = leader_partition(open_log(tmp_path))
    assert part.update_follower_fetch(9, 0, now_ms()) == ErrorCode.not_leader_or_follower
    part.make_follower(2, 2, 1, [1, 2, 3], [1, 2, 3])
    assert part.update_follower_fetch(2, 0, now_ms()) == ErrorCode.not_leader_or_follower


def test_isr_expands_when_a_follower_catches_up(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    part = leader_partition(open_log(tmp_path), isr=[1, 2], alter=proposals)
    append(part, 4)
    t = now_ms()
    part.update_follower_fetch(2, 4, t)
    assert part.high_watermark == 4
    part.update_follower_fetch(3, 2, t)  # behind the HW: not yet
    assert proposals == []
    part.update_follower_fetch(3, 4, t)
    assert proposals == [(1, 2, 3)] and part.pending_isr == (1, 2, 3)
    # while the expansion is in flight the HW already waits for 3 (maximal ISR)
    append(part, 2)
    part.update_follower_fetch(2, 6, t)
    assert part.high_watermark == 4
    part.update_follower_fetch(3, 5, t)
    assert part.high_watermark == 5
    # the controller's answer is adopted; a second proposal is not sent meanwhile
    assert part.on_alter_result(ErrorCode.none, 1, 1, [1, 2, 3])
    assert part.isr == [1, 2, 3] and part.partition_epoch == 1 and part.pending_isr is None
    assert proposals == [(1, 2, 3)]


def test_expansion_waits_for_the_current_leader_epoch(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    log = open_log(tmp_path)
    part = leader_partition(log, isr=[1, 2], alter=proposals, replicas=[1, 2, 3])
    append(part, 2)
    part.make_leader(2, 1, [1, 2, 3], [1], now_ms())  # a new epoch starting at offset 2
    part.update_follower_fetch(3, 1, now_ms())
    assert proposals == []  # below the start of epoch 2
    part.update_follower_fetch(3, 2, now_ms())
    assert proposals == [(1, 3)]


def test_isr_shrinks_after_replica_lag_time_max(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    part = leader_partition(open_log(tmp_path), alter=proposals)
    part.lag_max_ms = 1000
    t = now_ms()
    part.make_leader(2, 0, [1, 2, 3], [1, 2, 3], t)  # followers count as caught up at t
    append(part, 3)
    part.update_follower_fetch(2, 3, t)
    part.update_follower_fetch(3, 1, t)
    assert not part.maybe_shrink_isr(t + 1000)
    assert part.maybe_shrink_isr(t + 1001)
    assert proposals == [(1, 2)]
    # a pending shrink keeps 3 in the maximal ISR: the HW still waits for it
    assert part.high_watermark == 1
    assert part.on_alter_result(ErrorCode.none, 2, 1, [1, 2])
    assert part.high_watermark == 3


def test_caught_up_follower_at_log_end_stays_in_isr(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    part = leader_partition(open_log(tmp_path), alter=proposals)
    part.lag_max_ms = 1000
    t = now_ms()
    append(part, 2)
    part.update_follower_fetch(2, 2, t)
    part.update_follower_fetch(3, 2, t)
    assert not part.maybe_shrink_isr(t + 60_000)  # no appends since: nothing to lag behind


def test_stale_and_failed_alter_answers(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    part = leader_partition(open_log(tmp_path), isr=[1, 2], alter=proposals)
    part.update_follower_fetch(3, 0, now_ms())
    assert part.pending_isr == (1, 2, 3)
    # an answer for another leader epoch is dropped
    assert not part.on_alter_result(ErrorCode.none, 7, 3, [1, 2, 3])
    assert part.isr == [1, 2]
    # an error clears the proposal; the next fetch proposes again
    assert not part.on_alter_result(ErrorCode.invalid_update_version)
    assert part.pending_isr is None
    part.update_follower_fetch(3, 0, now_ms())
    assert proposals == [(1, 2, 3), (1, 2, 3)]
    # the image moved past the proposal first: the late answer is dropped
    part.update_isr([1, 2, 3], 5)
    assert part.pending_isr is None
    part.pending_isr = (1, 2)  # as if one more proposal went out
    assert not part.on_alter_result(ErrorCode.none, 1, 4, [1, 2])
    assert part.isr == [1, 2, 3] and part.partition_epoch == 5
    # an older image never overrides a newer ISR
    part.update_isr([1], 3)
    assert part.isr == [1, 2, 3]


def test_replication_config_from_broker_config() -> None:
    from odradek.metadata.config.broker_configs import BrokerConfig
    from odradek.replication.config import RACK_AWARE_SELECTOR, ReplicationConfig

    default = ReplicationConfig.from_config(BrokerConfig.from_properties({}))
    assert default == ReplicationConfig()
    assert (default.num_replica_fetchers, default.replica_lag_time_max_ms,
            default.replica_fetch_max_bytes) == (1, 30_000, 1_048_576)
    cfg = ReplicationConfig.from_config({
        "num.replica.fetchers": "3", "replica.fetch.wait.max.ms": "100",
        "replica.selector.class": RACK_AWARE_SELECTOR, "broker.rack": "r1"})
    assert (cfg.num_replica_fetchers, cfg.replica_fetch_wait_max_ms, cfg.broker_rack) == \
        (3, 100, "r1")
    assert cfg.replica_selector_class == RACK_AWARE_SELECTOR


def test_an_ineligible_broker_does_not_join_the_isr(tmp_path: Path) -> None:
    proposals: list[tuple[int, ...]] = []
    part = leader_partition(open_log(tmp_path), isr=[1, 2], alter=proposals)
    fenced = {3}
    part.isr_eligible = lambda r: r not in fenced
    part.update_follower_fetch(3, 0, now_ms())
    assert proposals == []  # fenced (or in controlled shutdown) in the image
    fenced.clear()
    part.update_follower_fetch(3, 0, now_ms())
    assert proposals == [(1, 2, 3)]
