"""The version ranges the handler modules declare: one per routed api, inside what Kafka and
our codecs allow, and exactly what the node routes and advertises."""

from __future__ import annotations

from collections import Counter

from odradek.broker.apis import HANDLERS, advertised_apis, declarations
from odradek.protocol.apis import BEYOND_KAFKA_39, KAFKA_39_VERSIONS, ApiKey, supported_versions
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
        k39 = KAFKA_39_VERSIONS[key]
        assert k39[0] <= lo <= hi <= max(k39[1], BEYOND_KAFKA_39.get(key, -1)), key
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
