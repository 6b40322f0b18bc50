"""Issue 16, points 5 and 6: the Spark source and sink over SASL_SSL (SCRAM-SHA-512) with the
Java-style `kafka.*` security options a `format("kafka")` query carries, against one node
with an authorizer: alice may read and write only the topics she was granted.

Set-up goes over the node's PLAINTEXT listener, whose User:ANONYMOUS is a super user here.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from pyspark.sql import DataFrame, SparkSession

from tests.integration.security_support import USERS, SecuredNode, start_secured
from tests.spark.support import create_topic, produce, read_all

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
GRANTED = ("sec-in", "sec-out")  # alice's topics; "sec-other" is not hers
DESCRIBE_ONLY = "sec-seen"  # alice may describe it (list its offsets) but not read it
DENIED = r"TopicAuthorizationException: Not authorized to access topics: \[{}\]"
N = 60
JKS_REFUSED = r"kafka\.ssl\.truststore\.location: a JKS trust store"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    s = start_secured(Path(tmp_path_factory.mktemp("spark-secured")),
                      {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"})
    try:
        plain = s.addr("PLAINTEXT")
        for topic in (*GRANTED, "sec-other", DESCRIBE_ONLY):
            create_topic(plain, topic, 2)
        admin = AdminClient({"bootstrap.servers": plain})
        bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                               "User:alice", "*", op, AclPermissionType.ALLOW)
                    for topic in GRANTED for op in (AclOperation.READ, AclOperation.WRITE)]
        bindings.append(AclBinding(ResourceType.TOPIC, DESCRIBE_ONLY, ResourcePatternType.LITERAL,
                                   "User:alice", "*", AclOperation.DESCRIBE,
                                   AclPermissionType.ALLOW))
        for f in admin.create_acls(bindings).values():
            f.result(30)
        yield s
    finally:
        assert s.node.stop() == 0, s.node.log()


def java_options(s: SecuredNode, password: str = USERS["alice"]) -> dict[str, str]:
    """What a Spark `format("kafka")` query over SASL_SSL says, word for word."""
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{password}";')
    return {"kafka.bootstrap.servers": s.addr("SASL_SSL"),
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.jaas.config": jaas,
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(s.ca.ca_pem)}


def _read(spark: SparkSession, options: dict[str, str], topic: str, path: str) -> DataFrame:
    return (spark.read.format("odradek").options(**options).option("subscribe", topic)
            .option("fetchPath", path).option("kafkaConsumer.pollTimeoutMs", "30000").load())


@pytest.fixture(scope="module")
def produced(secured: SecuredNode) -> Counter[tuple[bytes | None, bytes]]:
    # timestamps of now: the helper's default (2023) is past retention.ms, and the node's
    # retention check (every 5 minutes) emptied sec-in under a test that ran that late
    got = produce(secured.addr("PLAINTEXT"), "sec-in", N, 2, base_ts=int(time.time() * 1000))
    return Counter((p.key, p.value) for p in got)


@pytest.mark.parametrize("path", ["native", "librdkafka"])
def test_batch_read_over_sasl_ssl(spark: SparkSession, secured: SecuredNode,
                                  produced: Counter[tuple[bytes | None, bytes]], path: str) -> None:
    rows = _read(spark, java_options(secured), "sec-in", path).select("key", "value").collect()
    assert Counter((r.key and bytes(r.key), bytes(r.value)) for r in rows) == produced


def test_batch_write_over_sasl_ssl(spark: SparkSession, secured: SecuredNode) -> None:
    data = [(f"k{i}".encode(), f"v{i}") for i in range(N)]
    df = spark.createDataFrame(data, "key binary, value string").repartition(2)
    df.write.format("odradek").options(**java_options(secured)).option("topic", "sec-out") \
        .mode("append").save()
    want = Counter((k, v.encode()) for k, v in data)
    assert Counter(read_all(secured.addr("PLAINTEXT"), "sec-out", 2)) == want
    # and read back by the source over the same secured listener
    back = _read(spark, java_options(secured), "sec-out", "native").collect()
    assert Counter((bytes(r.key), bytes(r.value)) for r in back) == want


def test_acls_hold_for_the_source(spark: SparkSession, secured: SecuredNode,
                                  produced: Counter[tuple[bytes | None, bytes]]) -> None:
    """alice may not describe sec-other: a `subscribe` or an `assign` naming it fails with
    Java's TopicAuthorizationException naming the topic, as Spark's Kafka source does, rather
    than reading nothing (the listing hides the topic as if it did not exist); a pattern
    matches only what she may see, as Java's consumer does."""
    produce(secured.addr("PLAINTEXT"), "sec-other", 5, 2)
    with pytest.raises(Exception, match=DENIED.format("sec-other")):
        _read(spark, java_options(secured), "sec-other", "native").count()
    with pytest.raises(Exception, match=DENIED.format("sec-other")):
        (spark.read.format("odradek").options(**java_options(secured))
         .option("assign", '{"sec-other":[0,1]}').load().collect())
    seen = (spark.read.format("odradek").options(**java_options(secured))
            .option("subscribePattern", "sec-(other|in)").load()
            .select("topic").distinct().collect())
    assert [r.topic for r in seen] == ["sec-in"]


@pytest.mark.parametrize("path", ["native", "librdkafka"])
def test_describe_without_read_fails_the_fetch(spark: SparkSession, secured: SecuredNode,
                                               path: str) -> None:
    """Describe lets the planner list sec-seen's offsets; the fetch, which needs Read, fails
    the task naming the topic instead of waiting out its poll timeout."""
    produce(secured.addr("PLAINTEXT"), DESCRIBE_ONLY, 4, 2)
    with pytest.raises(Exception, match=DENIED.format(DESCRIBE_ONLY)):
        _read(spark, java_options(secured), DESCRIBE_ONLY, path).collect()


@pytest.mark.parametrize("path", ["native", "librdkafka"])
def test_wrong_password_fails_with_authentication_error(spark: SparkSession, secured: SecuredNode,
                                                        path: str) -> None:
    with pytest.raises(Exception, match=r"(?i)authentication") as failed:
        _read(spark, java_options(secured, "wrong"), "sec-in", path).collect()
    assert "alice" in str(failed.value) or "SCRAM" in str(failed.value) \
        or "credentials" in str(failed.value)


def test_jks_truststore_refused_by_name(spark: SparkSession, secured: SecuredNode) -> None:
    options = {**java_options(secured), "kafka.ssl.truststore.type": "JKS",
               "kafka.ssl.truststore.location": "/etc/ssl/truststore.jks"}
    with pytest.raises(Exception, match=JKS_REFUSED):
        _read(spark, options, "sec-in", "native").collect()
    with pytest.raises(Exception, match=JKS_REFUSED):
        spark.createDataFrame([(b"v",)], "value binary").write.format("odradek") \
            .options(**options).option("topic", "sec-out").mode("append").save()

