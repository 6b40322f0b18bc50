from __future__ import annotations

from odradek.coordinator.group.lag import LagStatus, Observation, PartitionLag, evaluate, roll_up


def window(*rows):
    return [Observation(o, leo, t) for o, leo, t in rows]


def test_burrow_rules():
    assert evaluate([], 5, 100) is LagStatus.OK
    assert evaluate(window((5, 10, 0)), 0, 100) is LagStatus.OK
    assert evaluate(window((5, 10, 0), (3, 10, 10)), 7, 15) is LagStatus.REWIND
    # commits stopped: 100 ms since the last, the window spans 10
    assert evaluate(window((5, 10, 0), (6, 10, 10)), 4, 110) is LagStatus.STOP
    stalled = window(*[(5, 10 + i, i * 10) for i in range(10)])
    assert evaluate(stalled, 14, 95) is LagStatus.STALL
    growing = window(*[(i, 10 + 2 * i, i * 10) for i in range(10)])
    assert evaluate(growing, 11, 95) is LagStatus.WARN
    keeping_up = window(*[(10 * i, 10 * i + 3, i * 10) for i in range(10)])
    assert evaluate(keeping_up, 3, 95) is LagStatus.OK
    with_zero = window(*[(10 * i, 10 * i + (0 if i == 4 else 3), i * 10) for i in range(10)])
    assert evaluate(with_zero, 3, 95) is LagStatus.OK


def test_roll_up_and_age():
    assert roll_up([LagStatus.OK, LagStatus.WARN]) is LagStatus.WARN
    assert roll_up([LagStatus.OK, LagStatus.STALL]) is LagStatus.ERR
    assert roll_up([LagStatus.REWIND]) is LagStatus.ERR
    assert roll_up([]) is LagStatus.OK
    w = PartitionLag()
    w.observe(10, 10, 1000)
    w.observe(12, 20, 2000)
    assert w.lag_age_ms(8, 2500) == 1500
    assert w.lag_age_ms(0, 2500) == 0
