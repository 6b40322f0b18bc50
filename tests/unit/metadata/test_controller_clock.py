"""The controller's broker sessions run on the monotonic clock (docs/reliability.md,
finding 9): clock seed 54 moved the active controller's wall clock back 300 s and then
forward again, and on the jump forward it fenced all three live brokers ("no heartbeat for
300389 ms"). Kafka's heartbeat manager reads the monotonic clock; so does ours by default."""

from __future__ import annotations

import time

import pytest

from odradek.metadata.config.broker_configs import BrokerConfig
from odradek.metadata.controller import Controller
from odradek.metadata.publisher import MetadataPublisher
from tests.unit.metadata.cluster_support import CLUSTER_ID, Clock, Cluster
from tests.unit.metadata.fake_quorum import FakeQuorum


def _cluster_on_the_default_clock() -> Cluster:
    quorum = FakeQuorum(100)
    publisher = MetadataPublisher(CLUSTER_ID)
    publisher.attach(quorum)
    config = BrokerConfig.from_properties({"node.id": "100",
                                           "broker.session.timeout.ms": "4000"})
    controller = Controller(quorum, publisher, config)  # no clock given: the default one
    controller.bootstrap()
    return Cluster(quorum, publisher, controller, Clock())


def test_a_wall_clock_jump_forward_fences_no_live_broker(monkeypatch):
    c = _cluster_on_the_default_clock()
    c.start_brokers(1, 2, 3)
    c.create("t", assignments={0: [1, 2, 3]})
    isr = c.partition("t", 0).isr
    wall = time.time
    monkeypatch.setattr(time, "time", lambda: wall() + 300)
    c.controller.tick()
    assert not any(c.image.brokers[b].fenced for b in (1, 2, 3))
    assert c.partition("t", 0).isr == isr


@pytest.mark.parametrize("wall_jump_s", [0, -300])
def test_a_silent_broker_is_fenced_when_its_session_runs_out(monkeypatch, wall_jump_s):
    """A wall clock stepped back must not keep a dead broker unfenced for the jump."""
    c = _cluster_on_the_default_clock()
    c.start_brokers(1, 2)
    wall, mono = time.time, time.monotonic
    monkeypatch.setattr(time, "time", lambda: wall() + wall_jump_s + 5.0)
    monkeypatch.setattr(time, "monotonic", lambda: mono() + 5.0)  # past the 4 s session
    c.controller.tick()
    assert c.image.brokers[1].fenced and c.image.brokers[2].fenced
