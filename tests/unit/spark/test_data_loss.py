"""The failOnDataLoss decision both task read paths share, without a broker or Spark."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.spark.data_loss import resume_after_loss
from odradek.spark.planner import DataLossError
from odradek.spark.ranges import OffsetRange


def _range(start: int, end: int, *, fail: bool) -> OffsetRange:
    return OffsetRange("orders", 3, start, end, fail_on_data_loss=fail)


def test_deleted_records_fail_naming_topic_partition_and_offsets() -> None:
    with pytest.raises(DataLossError) as info:
        resume_after_loss(_range(10, 100, fail=True), 10, 60, 100)
    text = str(info.value)
    assert "data loss on orders-3" in text
    assert "offset 10 is no longer available" in text
    assert "log start offset is 60" in text
    assert "failOnDataLoss=false" in text


def test_deleted_records_skipped_to_the_log_start_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.spark"):
        assert resume_after_loss(_range(10, 100, fail=False), 25, 60, 100) == 60
    assert [r.getMessage() for r in caplog.records] == [
        "data loss on orders-3: offsets 25..59 are gone, continuing (failOnDataLoss=false)"]


def test_position_one_below_the_log_start_is_deleted_records() -> None:
    assert resume_after_loss(_range(0, 100, fail=False), 59, 60) == 60
    with pytest.raises(DataLossError, match="offset 59 is no longer available"):
        resume_after_loss(_range(0, 100, fail=True), 59, 60)


@pytest.mark.parametrize("log_start", [100, 101, 500])
def test_log_start_at_or_past_the_range_end_leaves_nothing_to_read(log_start: int) -> None:
    assert resume_after_loss(_range(10, 100, fail=False), 10, log_start, log_start) == 100


def test_position_equal_to_the_log_start_is_beyond_the_end() -> None:
    # Out of range with nothing deleted below it: the log is shorter than planned.
    assert resume_after_loss(_range(40, 100, fail=False), 60, 60, 60) == 100
    with pytest.raises(DataLossError) as info:
        resume_after_loss(_range(40, 100, fail=True), 60, 60, 60)
    text = str(info.value)
    assert "data loss on orders-3: offset 60 is beyond the end of the log" in text
    assert "log end offset is 60" in text
    assert "Set failOnDataLoss=false to continue past it." in text


def test_beyond_the_end_without_a_known_log_end(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="odradek.spark"):
        assert resume_after_loss(_range(40, 100, fail=False), 70, 0) == 100
    assert [r.getMessage() for r in caplog.records] == [
        "data loss on orders-3: offset 70 is beyond the end of the log (the topic was deleted "
        "and recreated?). (continuing: failOnDataLoss=false)"]


def test_position_equal_to_the_log_end_is_beyond_the_end() -> None:
    with pytest.raises(DataLossError, match=r"offset 30 is beyond the end of the log \(log end offset is 30; "):
        resume_after_loss(_range(0, 100, fail=True), 30, 5, 30)


@given(start=st.integers(0, 1000), size=st.integers(1, 1000), step=st.integers(0, 999),
       log_start=st.integers(0, 3000), log_end=st.none() | st.integers(0, 3000))
def test_skipping_always_moves_forward_and_stays_in_the_range(start: int, size: int, step: int, log_start: int,
                                                              log_end: int | None) -> None:
    r = _range(start, start + size, fail=False)
    pos = start + step % size
    got = resume_after_loss(r, pos, log_start, log_end)
    assert pos < got <= r.end
    with pytest.raises(DataLossError):
        resume_after_loss(_range(start, start + size, fail=True), pos, log_start, log_end)
