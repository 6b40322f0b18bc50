"""`odradek group list|describe|reset-offsets|delete` and `odradek consume -g` on a real node."""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.cli_support import odradek, ok
from tests.integration.group_support import (
    Member,
    confluent_conf,
    new_topic,
    produce,
    start_node,
    wait_until,
)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = start_node(tmp_path_factory.mktemp("groups-cli") / "data")
    yield n
    n.stop()


def rows(out: str) -> list[list[str]]:
    lines = [ln.split() for ln in out.splitlines() if ln.strip()]
    return [r for r in lines if r and r[0] not in ("GROUP", "Consumer", "Group", "(plan", "TOTAL-LAG:")]


def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in res.result(30).topic_partitions}


def test_consume_with_group_then_describe_lag(node):
    topic = new_topic(node.bootstrap, "cli-lag", partitions=1)
    produce(node.bootstrap, topic, 50)
    out = ok("consume", topic, "-g", "cli-g", "--from-beginning", "-n", "20", "-f", "%v\\n",
             bootstrap=node.bootstrap)
    assert out.split() == [str(i) for i in range(20)]
    # the group resumes after what it printed
    out = ok("consume", topic, "-g", "cli-g", "-n", "5", "-f", "%v\\n", bootstrap=node.bootstrap)
    assert out.split() == [str(i) for i in range(20, 25)]
    listed = rows(ok("group", "list", bootstrap=node.bootstrap))
    assert ["cli-g", "classic", "Empty"] in listed
    assert rows(ok("group", "list", "--state", "stable", bootstrap=node.bootstrap)) == []
    desc = ok("group", "describe", "cli-g", bootstrap=node.bootstrap)
    [row] = rows(desc)
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ... STATUS LAG-MS
    assert row[:6] == ["cli-g", topic, "0", "25", "50", "25"]  # produced 50 - consumed 25
    assert row[-2] in ("OK", "WARN", "STOP", "STALL")
    assert "Group status:" in desc
    assert "\nTOTAL-LAG: 25\n" in desc
    state = rows(ok("group", "describe", "cli-g", "--state", bootstrap=node.bootstrap))
    assert state[0][0] == "cli-g" and "Empty" in state[0]
    missing = odradek("group", "describe", "no-such-group", bootstrap=node.bootstrap)
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_describe_members_of_active_group(node):
    topic = new_topic(node.bootstrap, "cli-members", partitions=2)
    m = Member(confluent_conf(node.bootstrap, "cli-active", **{"client.id": "the-client"}),
               [topic]).start()
    try:
        wait_until(lambda: len(m.assignment) == 2)
        members = rows(ok("group", "describe", "cli-active", "--members",
                          bootstrap=node.bootstrap))
        assert len(members) == 1
        assert members[0][2] == "/127.0.0.1" and members[0][3] == "the-client"
        assert members[0][4] == "2"
        # reset is refused while the group has members
        res = odradek("group", "reset-offsets", "cli-active", "--all-topics", "--to-earliest",
                      "--execute", bootstrap=node.bootstrap)
        assert res.returncode == 1
        assert "can only be reset if the group 'cli-active' is inactive" in res.stderr
        res = odradek("group", "delete", "cli-active", bootstrap=node.bootstrap)
        assert res.returncode == 1 and "NON_EMPTY_GROUP" in res.stderr
    finally:
        m.stop()


@pytest.fixture(scope="module")
def stopped_group(node):
    """A stopped group with offset 10 committed on each of 2 partitions of 30 records each."""
    topic = new_topic(node.bootstrap, "cli-reset", partitions=2)
    before = int(time.time() * 1000)
    for p in range(2):
        from confluent_kafka import Producer

        prod = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(30):
            prod.produce(topic, value=str(i).encode(), partition=p,
                         timestamp=before - (30 - i) * 60_000)  # one record a minute
        prod.flush(30)
    # the group comes to exist by a commit (reset-offsets refuses a group that does not exist)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "cli-reset-g", [TopicPartition(topic, p, 10) for p in range(2)])])["cli-reset-g"].result(30)
    assert committed(node.bootstrap, "cli-reset-g") == {0: 10, 1: 10}
    return topic, before


def reset(node, *args: str, execute: bool = True) -> dict[int, int]:
    out = ok("group", "reset-offsets", "cli-reset-g", *args, *(["--execute"] if execute else []),
             bootstrap=node.bootstrap)
    return {int(r[2]): int(r[3]) for r in rows(out)}


def test_reset_offsets_modes(node, stopped_group):
    topic, before = stopped_group
    # plan only: nothing changes
    assert reset(node, "--topic", topic, "--to-earliest", execute=False) == {0: 0, 1: 0}
    assert committed(node.bootstrap, "cli-reset-g") == {0: 10, 1: 10}
    assert reset(node, "--topic", topic, "--to-latest") == {0: 30, 1: 30}
    assert committed(node.bootstrap, "cli-reset-g") == {0: 30, 1: 30}
    assert reset(node, "--topic", topic, "--to-earliest") == {0: 0, 1: 0}
    assert reset(node, "--topic", f"{topic}:1", "--to-offset", "7") == {1: 7}
    assert committed(node.bootstrap, "cli-reset-g") == {0: 0, 1: 7}
    assert reset(node, "--all-topics", "--shift-by", "5") == {0: 5, 1: 12}
    assert reset(node, "--all-topics", "--shift-by", "-100") == {0: 0, 1: 0}  # clamped
    assert reset(node, "--topic", topic, "--to-offset", "999") == {0: 30, 1: 30}  # clamped
    # record i has timestamp before - (30 - i) minutes
    ts = datetime.datetime.fromtimestamp((before - 10 * 60_000 - 1000) / 1000,
                                         tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    assert reset(node, "--topic", topic, "--to-datetime", ts + "Z") == {0: 20, 1: 20}
    # the first record no older than now - 5m30s; "now" is read by the CLI somewhere between
    # t0 and t1, so the answer is the one for t0 or the one for t1
    def first_within(now_ms: int) -> int:
        return next(i for i in range(31) if i == 30 or before - (30 - i) * 60_000 >= now_ms - 330_000)

    t0 = int(time.time() * 1000)
    got = reset(node, "--topic", topic, "--by-duration", "PT5M30S")
    t1 = int(time.time() * 1000)
    assert got[0] == got[1] and got[0] in {first_within(t0), first_within(t1)}, (got, t0, t1)
    assert committed(node.bootstrap, "cli-reset-g") == got


def test_reset_from_file_and_delete(node, stopped_group, tmp_path):
    topic, _ = stopped_group
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,3\n{topic},1,4\n")
    assert reset(node, "--from-file", str(plan)) == {0: 3, 1: 4}
    assert committed(node.bootstrap, "cli-reset-g") == {0: 3, 1: 4}
    bad = odradek("group", "reset-offsets", "cli-reset-g", "--topic", topic, bootstrap=node.bootstrap)
    assert bad.returncode == 2
    ok("group", "delete", "cli-reset-g", bootstrap=node.bootstrap)
    assert "cli-reset-g" not in ok("group", "list", bootstrap=node.bootstrap)
    assert committed(node.bootstrap, "cli-reset-g") == {}
