"""`odradek topic ...` against a real node."""

from __future__ import annotations

import re

from tests.integration.cli_support import odradek, ok
from tests.support.broker import BrokerProcess


def topic_names(bootstrap: str | None = None, **kwargs: object) -> list[str]:
    """The NAME column of `topic list`."""
    lines = ok("topic", "list", bootstrap=bootstrap, **kwargs).splitlines()
    assert lines[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]
    return [line.split()[0] for line in lines[1:]]


def describe_lines(name: str, bootstrap: str, *extra: str) -> list[str]:
    return ok("topic", "describe", name, *extra, bootstrap=bootstrap).splitlines()


def test_create_describe_alter_add_delete(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    out = ok("topic", "create", "cli-topic", "-p", "3", "-r", "1", "-c", "retention.ms=86400000",
             bootstrap=b)
    assert out.strip() == "Created topic cli-topic."
    assert "cli-topic" in topic_names(b)

    lines = describe_lines("cli-topic", b)
    head = lines[0].split("\t")
    assert head[0] == "Topic: cli-topic"
    assert re.fullmatch(r"TopicId: [A-Za-z0-9_-]{22}", head[1]), head[1]
    assert head[2:] == ["PartitionCount: 3", "ReplicationFactor: 1",
                        "Configs: retention.ms=86400000"]
    assert lines[1:-1] == [f"\tTopic: cli-topic\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1"
                           for p in range(3)]
    assert lines[-1] == "Partitions: 3\tOffline: 0\tUnderReplicated: 0"

    full = "\n".join(describe_lines("cli-topic", b, "--configs"))
    assert "\t\tretention.ms=86400000\t(DYNAMIC_TOPIC_CONFIG)" in full
    assert "\t\tcleanup.policy=delete\t(DEFAULT_CONFIG)" in full

    out = ok("topic", "alter-config", "cli-topic", "--set", "cleanup.policy=compact",
             "--delete", "retention.ms", bootstrap=b)
    assert "Completed updating config for topic cli-topic." in out
    assert describe_lines("cli-topic", b)[0].endswith("Configs: cleanup.policy=compact")

    ok("topic", "add-partitions", "cli-topic", "-p", "5", bootstrap=b)
    lines = describe_lines("cli-topic", b)
    assert "PartitionCount: 5" in lines[0]
    assert len(lines) == 7

    assert ok("topic", "delete", "cli-topic", bootstrap=b).strip() == "Deleted topic cli-topic."
    assert "cli-topic" not in topic_names(b)
    gone = odradek("topic", "describe", "cli-topic", bootstrap=b)
    assert gone.returncode != 0
    assert "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr


def test_errors_print_kafka_error_names(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "cli-dup", "-p", "1", bootstrap=b)
    dup = odradek("topic", "create", "cli-dup", bootstrap=b)
    assert dup.returncode != 0
    assert "TOPIC_ALREADY_EXISTS" in dup.stderr
    assert ok("topic", "create", "cli-dup", "--if-not-exists", bootstrap=b).strip() == \
        "Topic cli-dup already exists."

    bad = odradek("topic", "create", "cli-bad-config", "-c", "retention.ms=soon", bootstrap=b)
    assert bad.returncode != 0
    assert "INVALID_CONFIG" in bad.stderr

    bad_name = odradek("topic", "create", "no/slashes", bootstrap=b)
    assert bad_name.returncode != 0
    assert "INVALID_TOPIC_EXCEPTION" in bad_name.stderr

    fewer = odradek("topic", "add-partitions", "cli-dup", "-p", "1", bootstrap=b)
    assert fewer.returncode != 0
    assert "INVALID_PARTITIONS" in fewer.stderr

    missing = odradek("topic", "delete", "cli-never-was", bootstrap=b)
    assert missing.returncode != 0
    assert "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr

    unknown_key = odradek("topic", "alter-config", "cli-dup", "--set", "no.such.config=1",
                          bootstrap=b)
    assert unknown_key.returncode != 0
    assert "INVALID_CONFIG" in unknown_key.stderr


def test_default_partitions_and_bootstrap_from_environment(shared_broker: BrokerProcess) -> None:
    env = {"ODRADEK_BOOTSTRAP": shared_broker.bootstrap}
    ok("topic", "create", "cli-env", env=env)
    assert "cli-env" in topic_names(env=env)
    # num.partitions defaults to 1 as in Kafka.
    assert "PartitionCount: 1\t" in ok("topic", "describe", "cli-env", env=env)


def test_unreachable_node_fails_cleanly() -> None:
    res = odradek("topic", "list", "--timeout", "2", bootstrap="127.0.0.1:1")
    assert res.returncode != 0
    assert res.stderr.startswith("Error: ")
    assert "Traceback" not in res.stderr
