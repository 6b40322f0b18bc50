"""Issue 12, point 4: `group describe` explains lag: TOTAL-LAG, the statuses in --help, and
a deliberate reset that is not reported as an error (while a member's rewind still is)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.integration.cli_support import ok
from tests.integration.group_support import (
    confluent_conf,
    new_topic,
    produce,
    start_node,
    wait_until,
)
from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    n = start_node(tmp_path_factory.mktemp("cli-lag") / "data")
    yield n
    n.stop()


def describe_json(node: BrokerProcess, group: str) -> dict[str, object]:
    return json.loads(ok("group", "describe", group, "--format", "json",
                         bootstrap=node.bootstrap))  # type: ignore[no-any-return]


def test_help_explains_status_lag_ms_and_group_status() -> None:
    text = ok("group", "describe", "--help")
    for word in ("TOTAL-LAG", "LAG-MS", "STATUS", "REWIND", "STOP", "STALL", "WARN",
                 "Group status", "docs/lag.md"):
        assert word in text, word
    # Burrow's rules, one sentence each
    assert "committed an offset below an earlier one" in text
    assert "commits stopped while lag remains" in text
    assert "kept the same offset while lag remains" in text
    assert "lag grew at each of the last 10" in text


def test_total_lag_and_a_deliberate_reset_is_not_an_error(node: BrokerProcess) -> None:
    topic = new_topic(node.bootstrap, "lag-reset", partitions=1)
    produce(node.bootstrap, topic, 60)
    ok("consume", topic, "-g", "lag-g", "--from-beginning", "-n", "20", "-f", "%v\\n",
       bootstrap=node.bootstrap)
    desc = describe_json(node, "lag-g")
    rows = desc["rows"]
    assert isinstance(rows, list)
    assert desc["total_lag"] == sum(r["lag"] for r in rows) == 40
    text = ok("group", "describe", "lag-g", bootstrap=node.bootstrap)
    assert "\nTOTAL-LAG: 40\n" in text

    # the operator rewinds the stopped group on purpose
    ok("group", "reset-offsets", "lag-g", "--all-topics", "--to-earliest", "--execute",
       bootstrap=node.bootstrap)
    desc = describe_json(node, "lag-g")
    assert desc["total_lag"] == 60
    statuses = {r["partition"]: r["status"] for r in desc["rows"]}  # type: ignore[union-attr]
    assert "REWIND" not in statuses.values(), statuses
    assert desc["group_status"] != "ERR", desc
    text = ok("group", "describe", "lag-g", bootstrap=node.bootstrap)
    assert "\nTOTAL-LAG: 60\n" in text
    assert "Group status: ERR" not in text


def test_a_member_committing_backwards_is_a_rewind(node: BrokerProcess) -> None:
    topic = new_topic(node.bootstrap, "lag-rewind", partitions=1)
    produce(node.bootstrap, topic, 30)
    cons = Consumer(confluent_conf(node.bootstrap, "lag-rw"))
    assigned: list[TopicPartition] = []
    cons.subscribe([topic], on_assign=lambda c, ps: assigned.extend(ps))
    try:
        wait_until(lambda: bool(cons.poll(0.1) or True) and bool(assigned), what="assignment")
        for offset in (20, 25, 5):
            cons.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        desc = describe_json(node, "lag-rw")
        [row] = desc["rows"]  # type: ignore[misc]
        assert row["current_offset"] == 5 and row["lag"] == 25
        assert row["status"] == "REWIND"
        assert desc["group_status"] == "ERR"
        text = ok("group", "describe", "lag-rw", bootstrap=node.bootstrap)
        assert "Group status: ERR (REWIND on a partition: a committed offset went backwards)" \
            in text
    finally:
        cons.close()
