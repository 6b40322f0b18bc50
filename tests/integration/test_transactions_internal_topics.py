"""DeleteTopics of the coordinators' internal topics is refused, through a real admin client;
the topics, the groups' offsets and the transactions keep working."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

INTERNAL = ("__consumer_offsets", "__transaction_state")


def test_internal_topics_cannot_be_deleted(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("plain-doomed", 1, 1)])["plain-doomed"].result(30)
    # a transaction first, so both internal topics hold state worth keeping
    p = Producer({"bootstrap.servers": b, "transactional.id": "keep-me"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("plain-doomed", b"v", partition=0)
    p.commit_transaction(30)
    c = Consumer({"bootstrap.servers": b, "group.id": "keep-group", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("plain-doomed", 0, 1)], asynchronous=False)
    before = admin.list_topics(timeout=30).topics
    assert all(t in before for t in INTERNAL)

    futures = admin.delete_topics([*INTERNAL, "plain-doomed"], operation_timeout=30)
    for name in INTERNAL:
        with pytest.raises(KafkaException) as info:
            futures[name].result(30)
        err = info.value.args[0]
        assert err.name() == "TOPIC_EXCEPTION", err  # INVALID_TOPIC_EXCEPTION (17)
        assert err.code() == 17
        assert any("refused DELETE_TOPICS" in x and name in x for x in broker.log().splitlines())
    futures["plain-doomed"].result(30)  # an ordinary topic in the same request goes

    after = admin.list_topics(timeout=30).topics
    for name in INTERNAL:
        assert name in after and len(after[name].partitions) == len(before[name].partitions)
    assert "plain-doomed" not in after
    # the coordinators still answer from their topics
    [tp] = c.committed([TopicPartition("plain-doomed", 0)], timeout=30)
    assert tp.offset == 1
    c.close()
    p.begin_transaction()
    p.abort_transaction(30)
