"""The refusal log: non-routine refusals once, repeats counted, a flood capped."""

from __future__ import annotations

import logging
from typing import NamedTuple

import pytest

from odradek.broker.refusals import RefusalLog
from odradek.protocol.errors import ErrorCode


class Header(NamedTuple):
    api_key: int
    api_version: int
    client_id: str | None


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logger(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.INFO, logger="test.refusals")
    return logging.getLogger("test.refusals")


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.refusals"]


def test_repeats_are_one_line_until_the_window_ends(logger: logging.Logger,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = RefusalLog(logger, repeat_s=60, clock=clock)
    for _ in range(50):
        refusals.refused("c1", "CREATE_TOPICS v7", "INVALID_CONFIG", "retention.ms")
    assert lines(caplog) == [
        "refused CREATE_TOPICS v7 from client 'c1': INVALID_CONFIG: retention.ms"]
    clock.now += 61
    refusals.refused("c1", "CREATE_TOPICS v7", "INVALID_CONFIG", "retention.ms")
    assert "49 more like it" in lines(caplog)[-1]
    # another client or another reason is its own line
    refusals.refused("c2", "CREATE_TOPICS v7", "INVALID_CONFIG", "retention.ms")
    refusals.refused("c1", "CREATE_TOPICS v7", "INVALID_CONFIG", "segment.bytes")
    assert len(lines(caplog)) == 4


def test_a_flood_of_distinct_refusals_is_capped(logger: logging.Logger,
                                                caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    refusals = RefusalLog(logger, burst=10, rate=1.0, max_keys=100, clock=clock)
    for i in range(10_000):  # a hostile client varying its client id
        refusals.refused(f"c{i}", "PRODUCE v9", "CORRUPT_MESSAGE", None, f"10.0.0.1:{i}")
    assert len(lines(caplog)) == 10
    assert len(refusals._keys) <= 100  # memory stays bounded
    clock.now += 5  # five lines' worth of budget comes back
    for i in range(10):
        refusals.refused(f"d{i}", "PRODUCE v9", "CORRUPT_MESSAGE")
    out = lines(caplog)
    assert len(out) == 15
    assert "9990 other refusals not logged (rate limit)" in out[10]


def test_responses_log_only_non_routine_errors(logger: logging.Logger,
                                               caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(logger)
    routine = {"topics": [{"name": "t", "error_code": ErrorCode.unknown_topic_or_partition,
                           "partitions": [{"error_code": ErrorCode.offset_out_of_range}]}]}
    refusals.response(Header(3, 12, "c"), routine)
    refusals.response(Header(11, 5, "c"), {"error_code": ErrorCode.rebalance_in_progress})
    refusals.response(Header(18, 4, "c"), {"error_code": ErrorCode.unsupported_version})
    assert lines(caplog) == []
    bad = {"topics": [{"name": "ok", "error_code": 0},
                      {"name": "x y", "error_code": ErrorCode.invalid_topic_exception,
                       "error_message": "illegal name"}]}
    refusals.response(Header(19, 7, "admin-1"), bad)
    assert lines(caplog) == ["refused CREATE_TOPICS v7 from client 'admin-1': "
                             "INVALID_TOPIC_EXCEPTION: 'x y': illegal name"]


def test_nothing_is_counted_when_info_is_off(logger: logging.Logger,
                                             caplog: pytest.LogCaptureFixture) -> None:
    logger.setLevel(logging.WARNING)
    try:
        refusals = RefusalLog(logger, burst=1)
        assert not refusals.refused("c", "PRODUCE v9", "CORRUPT_MESSAGE")
        assert lines(caplog) == []
    finally:
        logger.setLevel(logging.NOTSET)


def test_long_client_supplied_text_is_cut(logger: logging.Logger,
                                          caplog: pytest.LogCaptureFixture) -> None:
    refusals = RefusalLog(logger)
    refusals.refused("x" * 5000, "CREATE_TOPICS v7", "INVALID_TOPIC_EXCEPTION", "n" * 100_000)
    (line,) = lines(caplog)
    assert len(line) < 1200 and "more chars" in line
