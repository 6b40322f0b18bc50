"""Retention against a live node: size and time bounds, consumers below the log start, live
config changes, and bad config input (issue 5)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from tests.support.background import create_topic
from tests.support.broker import BrokerProcess

SETTINGS = {
    "log.retention.check.interval.ms": "300",
    "log.cleaner.backoff.ms": "200",
    "log.segment.delete.delay.ms": "500",
}
HOUR_AGO = int(time.time() * 1000) - 3_600_000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    n = BrokerProcess(tmp_path_factory.mktemp("retention") / "data", settings=SETTINGS)
    n.start()
    try:
        yield n
    finally:
        n.stop()


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, n: int, size: int = 200, timestamp: int = 0,
            key: Callable[[int], bytes] | None = None, start: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096})
    errors: list[str] = []
    for i in range(start, start + n):
        p.produce(topic, partition=0, key=key(i) if key else b"k%d" % i,
                  value=b"%08d" % i + b"x" * (size - 8), timestamp=timestamp,
                  on_delivery=lambda e, m: errors.append(str(e)) if e else None)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    finally:
        c.close()


def retention_pass_ran(node: BrokerProcess, witness: str) -> None:
    """Wait for a retention check run after this call: a fresh topic of old records under a
    short retention.ms loses them only in such a pass, and each pass covers every log."""
    create_topic(node.bootstrap, witness, 1, {"segment.bytes": "4096", "retention.ms": "1000"})
    produce(node.bootstrap, witness, 20, timestamp=HOUR_AGO)
    wait_until(lambda: watermarks(node.bootstrap, witness) == (20, 20),
               f"a retention pass deleting {witness}")


def log_bytes(node: BrokerProcess, topic: str) -> int:
    total = 0
    for p in (node.data_dir / f"{topic}-0").glob("*.log"):
        try:
            total += p.stat().st_size
        except FileNotFoundError:  # renamed to .deleted by retention meanwhile
            pass
    return total


def test_size_retention_stays_within_bound_under_continuous_produce(node: BrokerProcess) -> None:
    topic, seg, bound = "size-ret", 16_384, 65_536
    create_topic(node.bootstrap, topic, 1, {"segment.bytes": str(seg),
                                             "retention.bytes": str(bound)})
    produced = 0
    for round_ in range(8):
        produce(node.bootstrap, topic, 1_000, start=produced)  # ~220 KB a round
        produced += 1_000
        # Kafka's bound: what is left minus its oldest segment is under retention.bytes
        wait_until(lambda: log_bytes(node, topic) <= bound + seg, f"retention in round {round_}")
    low, high = watermarks(node.bootstrap, topic)
    assert high == produced and 0 < low < high
    # the files of deleted segments go after file.delete.delay.ms
    wait_until(lambda: not list((node.data_dir / f"{topic}-0").glob("*.deleted")), ".deleted gone")


def test_time_retention_drops_old_segments(node: BrokerProcess) -> None:
    topic = "time-ret"
    create_topic(node.bootstrap, topic, 1, {"segment.bytes": "4096", "retention.ms": "2000"})
    produce(node.bootstrap, topic, 200, timestamp=HOUR_AGO)
    # everything is older than retention.ms: like Kafka, even the active segment goes
    wait_until(lambda: watermarks(node.bootstrap, topic) == (200, 200), "all old segments deleted")
    produce(node.bootstrap, topic, 50, start=200)  # fresh records stay
    retention_pass_ran(node, "time-ret-witness")
    assert watermarks(node.bootstrap, topic) == (200, 250)


def _retained_topic(node: BrokerProcess, topic: str) -> int:
    create_topic(node.bootstrap, topic, 1, {"segment.bytes": "4096", "retention.bytes": "8192"})
    produce(node.bootstrap, topic, 300)
    wait_until(lambda: watermarks(node.bootstrap, topic)[0] > 100, "log start to move")
    # a pass may still be under way (the log start was read between two of its deletions):
    # after one whole pass more the log is within its bound and the start stays put
    retention_pass_ran(node, f"{topic}-witness")
    return watermarks(node.bootstrap, topic)[0]


@pytest.mark.parametrize("reset", ["earliest", "latest", "error"])
def test_confluent_consumer_below_log_start_resets(node: BrokerProcess, reset: str) -> None:
    topic = f"below-start-{reset}"
    low = _retained_topic(node, topic)
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": f"g-{reset}",
                  "auto.offset.reset": reset, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    try:
        if reset == "latest":
            time.sleep(1.0)
            produce(node.bootstrap, topic, 1, start=10_000)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if reset == "error":
                assert m.error() is not None
                assert m.error().code() == KafkaError._AUTO_OFFSET_RESET
                assert "out of range" in str(m.error()).lower()
                return
            assert m.error() is None, m.error()
            if reset == "earliest":
                assert m.offset() == low
            else:
                assert m.offset() == 300 and m.value().startswith(b"00010000")
            return
        raise AssertionError("no message or error")
    finally:
        c.close()


def test_kafka_python_consumer_below_log_start_resets(node: BrokerProcess) -> None:
    topic = "below-start-kp"
    low = _retained_topic(node, topic)
    c = KafkaConsumer(bootstrap_servers=node.bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False)
    tp = KTopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)  # below the log start: the fetch gets OFFSET_OUT_OF_RANGE, then resets
    got: list[int] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline and (not got or got[-1] < 299):
            for msgs in c.poll(timeout_ms=200).values():
                got += [m.offset for m in msgs]
    finally:
        c.close()
    assert got and got[0] == low and got == list(range(low, 300))


def _describe(bootstrap: str, topic: str) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([res])[res].result(60)


def _cli(node: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek.cli.main", *args, "-b", node.bootstrap],
                          capture_output=True, text=True, timeout=60)


def test_shortened_retention_applies_live(node: BrokerProcess) -> None:
    topic = "live-config"
    create_topic(node.bootstrap, topic, 1, {"segment.bytes": "4096"})
    produce(node.bootstrap, topic, 200, timestamp=HOUR_AGO)
    retention_pass_ran(node, "live-config-witness")
    assert watermarks(node.bootstrap, topic) == (0, 200)  # 7 days by default
    out = _cli(node, "topic", "alter-config", topic, "--set", "retention.ms=1000")
    assert out.returncode == 0, out.stderr
    entry = _describe(node.bootstrap, topic)["retention.ms"]
    assert entry.value == "1000" and entry.source == 1  # DYNAMIC_TOPIC_CONFIG
    wait_until(lambda: watermarks(node.bootstrap, topic)[0] == 200, "retention to apply")
    out = _cli(node, "topic", "describe", topic, "--configs")
    assert out.returncode == 0 and "retention.ms" in out.stdout and "1000" in out.stdout
    out = _cli(node, "topic", "alter-config", topic, "--delete", "retention.ms")
    assert out.returncode == 0, out.stderr
    entry = _describe(node.bootstrap, topic)["retention.ms"]
    assert entry.value == "604800000" and entry.source != 1


BAD = [
    ({"no.such.config": "1"}, "no.such.config"),
    ({"retention.ms": "-2"}, "retention.ms"),
    ({"retention.ms": "soon"}, "retention.ms"),
    ({"segment.bytes": "10"}, "segment.bytes"),
    ({"cleanup.policy": "shred"}, "cleanup.policy"),
    ({"retention.bytes": "-2"}, "retention.bytes"),
    ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
]


@pytest.mark.parametrize(("configs", "key"), BAD)
def test_bad_config_refused_at_creation(node: BrokerProcess, configs: dict[str, str], key: str) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    name = "bad-create-" + "-".join(f"{k}-{v}" for k, v in configs.items())
    fut = admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name]
    with pytest.raises(KafkaException) as exc:
        fut.result(60)
    err = exc.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG and key in err.str()
    assert name not in admin.list_topics(timeout=30).topics


@pytest.mark.parametrize(("configs", "key"), BAD)
def test_bad_config_refused_on_alter_nothing_half_applied(
    node: BrokerProcess, configs: dict[str, str], key: str
) -> None:
    topic = "bad-alter-" + "-".join(f"{k}-{v}" for k, v in configs.items())
    create_topic(node.bootstrap, topic, 1, {"retention.ms": "123456"})
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    entries = [ConfigEntry("segment.ms", "99999", incremental_operation=AlterConfigOpType.SET)]
    entries += [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in configs.items()]
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([res])[res].result(60)
    err = exc.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG and key in err.str()
    described = _describe(node.bootstrap, topic)
    assert described["segment.ms"].value == "604800000"  # the good key was not applied either
    assert described["retention.ms"].value == "123456"
    out = _cli(node, "topic", "alter-config", topic, *[a for k, v in configs.items()
                                                      for a in ("--set", f"{k}={v}")])
    assert out.returncode != 0 and key in (out.stderr + out.stdout)


def test_broker_retention_default_applies_live(node: BrokerProcess) -> None:
    """log.retention.ms set on the broker at runtime (Kafka's per-broker dynamic default)
    applies to a topic without its own retention.ms, with Kafka's sources and synonyms;
    advertised.listeners is refused as Kafka 4.x refuses it (read-only, KAFKA-18405)."""
    topic = "broker-default"
    create_topic(node.bootstrap, topic, 1, {"segment.bytes": "4096"})
    produce(node.bootstrap, topic, 200, timestamp=HOUR_AGO)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    broker_id = str(admin.describe_cluster().result(60).nodes[0].id)

    def alter(name: str, value: str | None) -> None:
        op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
        res = ConfigResource(ResourceType.BROKER, broker_id, incremental_configs=[
            ConfigEntry(name, value or "", incremental_operation=op)])
        admin.incremental_alter_configs([res])[res].result(60)

    alter("log.retention.ms", "1000")
    try:
        entry = _describe(node.bootstrap, topic)["retention.ms"]
        assert (entry.value, entry.source) == ("1000", 2)  # DYNAMIC_BROKER_CONFIG
        assert "log.retention.ms" in entry.synonyms
        res = ConfigResource(ResourceType.BROKER, broker_id)
        described = admin.describe_configs([res])[res].result(60)
        broker_entry = described["log.retention.ms"]
        assert (broker_entry.value, broker_entry.source) == ("1000", 2)
        assert not broker_entry.is_read_only
        assert broker_entry.synonyms["log.retention.hours"].value == "168"
        assert described["advertised.listeners"].is_read_only
        wait_until(lambda: watermarks(node.bootstrap, topic)[0] == 200,
                   "the broker's retention default to apply")
    finally:
        alter("log.retention.ms", None)
    entry = _describe(node.bootstrap, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("604800000", 5)  # DEFAULT_CONFIG

    with pytest.raises(KafkaException) as exc:
        alter("advertised.listeners", "PLAINTEXT://elsewhere.example:9092")
    err = exc.value.args[0]
    assert err.code() == KafkaError.INVALID_REQUEST and "advertised.listeners" in err.str()
    meta = admin.list_topics(timeout=60)
    assert "elsewhere.example" not in {b.host for b in meta.brokers.values()}
