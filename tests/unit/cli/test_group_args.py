from __future__ import annotations

import pytest

from odradek.cli.group import _parse_topic_specs, parse_datetime_ms, parse_duration_ms


def test_durations():
    assert parse_duration_ms("PT10M") == 600_000
    assert parse_duration_ms("P1DT2H") == 93_600_000
    assert parse_duration_ms("PT0.5S") == 500
    assert parse_duration_ms("P2D") == 172_800_000
    for bad in ("", "P", "PT", "10M", "PT10X", "P1H"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)


def test_datetimes():
    assert parse_datetime_ms("1970-01-01T00:00:01.500Z") == 1500
    assert parse_datetime_ms("1970-01-01T01:00:00+01:00") == 0
    with pytest.raises(ValueError):
        parse_datetime_ms("yesterday")


def test_topic_specs():
    assert _parse_topic_specs(["a", "b:0,2"]) == [("a", None), ("b", [0, 2])]
    with pytest.raises(ValueError):
        _parse_topic_specs(["b:x"])
    with pytest.raises(ValueError):
        _parse_topic_specs([":1"])
