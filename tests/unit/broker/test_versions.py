"""The version ranges the handler modules declare: one per routed api, inside what Kafka and
our codecs allow, and exactly what the node routes and advertises."""

from __future__ import annotations

from collections import Counter

from odradek.broker.apis import HANDLERS, advertised_apis, declarations
from odradek.protocol.apis import (
    BEYOND_KAFKA_39,
    KAFKA_39_VERSIONS,
    KAFKA_42_VERSIONS,
    ApiKey,
    supported_versions,
)
from odradek.protocol.messages import request_class


def test_every_routed_api_has_exactly_one_declaration() -> None:
    counts = Counter(d.api_key for d in declarations())
    assert {k: n for k, n in counts.items() if n != 1} == {}
    assert set(counts) == set(HANDLERS)
    assert advertised_apis() == {int(d.api_key): (d.min_version, d.max_version)
                                 for d in declarations()}


def test_supported_is_servable() -> None:
    served = {ApiKey(k): v for k, v in advertised_apis().items()}
    for key, (lo, hi) in served.items():
        k39 = KAFKA_39_VERSIONS.get(key, KAFKA_42_VERSIONS.get(key))
        assert k39 is not None, key
        ceiling = max(k39[1], BEYOND_KAFKA_39.get(key, -1), KAFKA_42_VERSIONS.get(key, k39)[1])
        assert k39[0] <= lo <= hi <= ceiling, key
        # and inside what our codecs read
        assert supported_versions([key])[key][0] <= lo, key
        for v in range(lo, hi + 1):
            if key != ApiKey.PRODUCE:
                request_class(key, v)
    # versions older librdkafka (2.0.x) looks for
    assert served[ApiKey.PRODUCE][0] == 0 and served[ApiKey.PRODUCE][1] >= 7
    assert served[ApiKey.FETCH][0] <= 4 <= 10 <= served[ApiKey.FETCH][1]
    assert served[ApiKey.LIST_OFFSETS][0] <= 1
    extra = supported_versions([ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SASL_HANDSHAKE,
                                ApiKey.INIT_PRODUCER_ID, ApiKey.OFFSET_COMMIT])
    assert extra[ApiKey.FIND_COORDINATOR][0] == 0
    assert extra[ApiKey.SASL_HANDSHAKE] == (0, 1)
    assert extra[ApiKey.OFFSET_COMMIT][0] == 2  # kio reads v2+


# What odradek serves below Kafka 4.2's highest version, and why; nothing else may lag.
BELOW_KAFKA_42 = {
    # KIP-1219's allow_replication_factor_change: reassignment is issue 10's
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    # KIP-1152's transactional id pattern: the transaction engineer's handlers
    ApiKey.LIST_TRANSACTIONS: 1,
    # broker-to-broker: odradek's coordinators send and serve v1 (Kafka 4.2's v2 adds the
    # markers' transaction version, KIP-890 part 2)
    ApiKey.WRITE_TXN_MARKERS: 1,
}


def test_kafka_42s_versions_are_served() -> None:
    served = {ApiKey(k): v for k, v in advertised_apis().items()}
    lagging = {k: hi for k, (_, hi) in served.items()
               if k in KAFKA_42_VERSIONS and hi < KAFKA_42_VERSIONS[k][1]}
    assert lagging == {k: v for k, v in BELOW_KAFKA_42.items() if v is not None}
    for key in (ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.LIST_CONFIG_RESOURCES,
                ApiKey.DESCRIBE_QUORUM, ApiKey.PRODUCE, ApiKey.LIST_OFFSETS, ApiKey.METADATA,
                ApiKey.FETCH, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH):
        assert served[key][1] == KAFKA_42_VERSIONS[key][1], key
