"""Kafka API keys, version ranges, header versions and flexible versions.

The header/flexible tables cover every api key and version Kafka knows (also
the ones this node refuses and the ones Kafka 4 removed), because the broker
must parse the header of a request before it can refuse it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import NamedTuple

__all__ = [
    "BEYOND_KAFKA_39",
    "FIRST_FLEXIBLE_VERSION",
    "KAFKA_39_VERSIONS",
    "KAFKA_42_VERSIONS",
    "ApiKey",
    "ApiVersionRange",
    "is_flexible",
    "request_header_version",
    "response_header_version",
    "supported_versions",
]


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    ALLOCATE_PRODUCER_IDS = 67
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    CONTROLLER_REGISTRATION = 70
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    ASSIGN_REPLICAS_TO_DIRS = 73
    LIST_CONFIG_RESOURCES = 74  # ListClientMetricsResources before Kafka 4.1
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    ADD_RAFT_VOTER = 80
    REMOVE_RAFT_VOTER = 81
    UPDATE_RAFT_VOTER = 82
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class ApiVersionRange(NamedTuple):
    """The versions of one api a handler serves, both ends included.

    Each broker handler module declares these next to its handlers; the broker routes and
    advertises exactly what is declared.
    """

    api_key: ApiKey
    min_version: int
    max_version: int


_K = ApiKey

# First flexible version of each api ("flexibleVersions": "N+" in Kafka's
# message JSON); None when no version is flexible. Every api whose
# flexibleVersions is set uses "N+", so a version >= N is flexible.
FIRST_FLEXIBLE_VERSION: Mapping[ApiKey, int | None] = {
    _K.PRODUCE: 9,
    _K.FETCH: 12,
    _K.LIST_OFFSETS: 6,
    _K.METADATA: 9,
    _K.LEADER_AND_ISR: 4,
    _K.STOP_REPLICA: 2,
    _K.UPDATE_METADATA: 6,
    _K.CONTROLLED_SHUTDOWN: 3,
    _K.OFFSET_COMMIT: 8,
    _K.OFFSET_FETCH: 6,
    _K.FIND_COORDINATOR: 3,
    _K.JOIN_GROUP: 6,
    _K.HEARTBEAT: 4,
    _K.LEAVE_GROUP: 4,
    _K.SYNC_GROUP: 4,
    _K.DESCRIBE_GROUPS: 5,
    _K.LIST_GROUPS: 3,
    _K.SASL_HANDSHAKE: None,
    _K.API_VERSIONS: 3,
    _K.CREATE_TOPICS: 5,
    _K.DELETE_TOPICS: 4,
    _K.DELETE_RECORDS: 2,
    _K.INIT_PRODUCER_ID: 2,
    _K.OFFSET_FOR_LEADER_EPOCH: 4,
    _K.ADD_PARTITIONS_TO_TXN: 3,
    _K.ADD_OFFSETS_TO_TXN: 3,
    _K.END_TXN: 3,
    _K.WRITE_TXN_MARKERS: 1,
    _K.TXN_OFFSET_COMMIT: 3,
    _K.DESCRIBE_ACLS: 2,
    _K.CREATE_ACLS: 2,
    _K.DELETE_ACLS: 2,
    _K.DESCRIBE_CONFIGS: 4,
    _K.ALTER_CONFIGS: 2,
    _K.ALTER_REPLICA_LOG_DIRS: 2,
    _K.DESCRIBE_LOG_DIRS: 2,
    _K.SASL_AUTHENTICATE: 2,
    _K.CREATE_PARTITIONS: 2,
    _K.CREATE_DELEGATION_TOKEN: 2,
    _K.RENEW_DELEGATION_TOKEN: 2,
    _K.EXPIRE_DELEGATION_TOKEN: 2,
    _K.DESCRIBE_DELEGATION_TOKEN: 2,
    _K.DELETE_GROUPS: 2,
    _K.ELECT_LEADERS: 2,
    _K.INCREMENTAL_ALTER_CONFIGS: 1,
    _K.OFFSET_DELETE: None,
    _K.DESCRIBE_CLIENT_QUOTAS: 1,
    _K.ALTER_CLIENT_QUOTAS: 1,
    _K.BEGIN_QUORUM_EPOCH: 1,
    _K.END_QUORUM_EPOCH: 1,
    # Every other api (45, 46, 50..92 except the quorum epochs) is flexible from v0.
}

# Versions a Kafka 3.9 broker advertises to clients (plus the broker/controller
# apis for completeness); the handlers pick their served range from here.
KAFKA_39_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    _K.PRODUCE: (0, 11),
    _K.FETCH: (0, 17),
    _K.LIST_OFFSETS: (0, 9),
    _K.METADATA: (0, 12),
    _K.OFFSET_COMMIT: (0, 9),
    _K.OFFSET_FETCH: (0, 9),
    _K.FIND_COORDINATOR: (0, 5),
    _K.JOIN_GROUP: (0, 9),
    _K.HEARTBEAT: (0, 4),
    _K.LEAVE_GROUP: (0, 5),
    _K.SYNC_GROUP: (0, 5),
    _K.DESCRIBE_GROUPS: (0, 5),
    _K.LIST_GROUPS: (0, 5),
    _K.SASL_HANDSHAKE: (0, 1),
    _K.API_VERSIONS: (0, 4),
    _K.CREATE_TOPICS: (0, 7),
    _K.DELETE_TOPICS: (0, 6),
    _K.DELETE_RECORDS: (0, 2),
    _K.INIT_PRODUCER_ID: (0, 5),
    _K.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    _K.ADD_PARTITIONS_TO_TXN: (0, 5),
    _K.ADD_OFFSETS_TO_TXN: (0, 4),
    _K.END_TXN: (0, 4),
    _K.WRITE_TXN_MARKERS: (0, 1),
    _K.TXN_OFFSET_COMMIT: (0, 4),
    _K.DESCRIBE_ACLS: (0, 3),
    _K.CREATE_ACLS: (0, 3),
    _K.DELETE_ACLS: (0, 3),
    _K.DESCRIBE_CONFIGS: (0, 4),
    _K.ALTER_CONFIGS: (0, 2),
    _K.ALTER_REPLICA_LOG_DIRS: (0, 2),
    _K.DESCRIBE_LOG_DIRS: (0, 4),
    _K.SASL_AUTHENTICATE: (0, 2),
    _K.CREATE_PARTITIONS: (0, 3),
    _K.CREATE_DELEGATION_TOKEN: (0, 3),
    _K.RENEW_DELEGATION_TOKEN: (0, 2),
    _K.EXPIRE_DELEGATION_TOKEN: (0, 2),
    _K.DESCRIBE_DELEGATION_TOKEN: (0, 3),
    _K.DELETE_GROUPS: (0, 2),
    _K.ELECT_LEADERS: (0, 2),
    _K.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    _K.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    _K.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    _K.OFFSET_DELETE: (0, 0),
    _K.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    _K.ALTER_CLIENT_QUOTAS: (0, 1),
    _K.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    _K.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    _K.DESCRIBE_QUORUM: (0, 2),
    _K.UPDATE_FEATURES: (0, 1),
    _K.DESCRIBE_CLUSTER: (0, 1),
    _K.DESCRIBE_PRODUCERS: (0, 0),
    _K.UNREGISTER_BROKER: (0, 0),
    _K.DESCRIBE_TRANSACTIONS: (0, 0),
    _K.LIST_TRANSACTIONS: (0, 1),
    _K.CONSUMER_GROUP_HEARTBEAT: (0, 0),
    _K.CONSUMER_GROUP_DESCRIBE: (0, 0),
    _K.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    _K.PUSH_TELEMETRY: (0, 0),
    _K.LIST_CONFIG_RESOURCES: (0, 0),
    _K.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    _K.ADD_RAFT_VOTER: (0, 0),
    _K.REMOVE_RAFT_VOTER: (0, 0),
}

# Versions advertised above Kafka 3.9's maximum, because current clients need them.
BEYOND_KAFKA_39: Mapping[ApiKey, int] = {
    _K.CONSUMER_GROUP_HEARTBEAT: 1,
    _K.CONSUMER_GROUP_DESCRIBE: 1,
    _K.PRODUCE: 12,
    _K.END_TXN: 5,
    _K.TXN_OFFSET_COMMIT: 5,
    _K.DESCRIBE_CLUSTER: 2,  # Kafka 4.0: include_fenced_brokers (odradek cluster describe)
}

# What a Kafka 4.2 broker advertises on its client listener (its ApiVersions answer; the
# message specs are Kafka's clients/src/main/resources/common/message/*.json, which kio 0.6.5
# is generated from, so every version here has a kio entity). Kafka 4 dropped old versions
# (KIP-896) that odradek keeps serving for older clients: the low ends come from
# KAFKA_39_VERSIONS, the high ends from here.
KAFKA_42_VERSIONS: Mapping[ApiKey, tuple[int, int]] = {
    _K.PRODUCE: (3, 13),
    _K.FETCH: (4, 18),
    _K.LIST_OFFSETS: (1, 11),
    _K.METADATA: (0, 13),
    _K.OFFSET_COMMIT: (2, 10),
    _K.OFFSET_FETCH: (1, 10),
    _K.FIND_COORDINATOR: (0, 6),
    _K.JOIN_GROUP: (0, 9),
    _K.HEARTBEAT: (0, 4),
    _K.LEAVE_GROUP: (0, 5),
    _K.SYNC_GROUP: (0, 5),
    _K.DESCRIBE_GROUPS: (0, 6),
    _K.LIST_GROUPS: (0, 5),
    _K.SASL_HANDSHAKE: (0, 1),
    _K.API_VERSIONS: (0, 4),
    _K.CREATE_TOPICS: (2, 7),
    _K.DELETE_TOPICS: (1, 6),
    _K.DELETE_RECORDS: (0, 2),
    _K.INIT_PRODUCER_ID: (0, 5),
    _K.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    _K.ADD_PARTITIONS_TO_TXN: (0, 5),
    _K.ADD_OFFSETS_TO_TXN: (0, 4),
    _K.END_TXN: (0, 5),
    _K.WRITE_TXN_MARKERS: (1, 2),
    _K.TXN_OFFSET_COMMIT: (0, 5),
    _K.DESCRIBE_ACLS: (1, 3),
    _K.CREATE_ACLS: (1, 3),
    _K.DELETE_ACLS: (1, 3),
    _K.DESCRIBE_CONFIGS: (1, 4),
    _K.ALTER_CONFIGS: (0, 2),
    _K.ALTER_REPLICA_LOG_DIRS: (1, 2),
    _K.DESCRIBE_LOG_DIRS: (1, 4),
    _K.SASL_AUTHENTICATE: (0, 2),
    _K.CREATE_PARTITIONS: (0, 3),
    _K.CREATE_DELEGATION_TOKEN: (1, 3),
    _K.RENEW_DELEGATION_TOKEN: (1, 2),
    _K.EXPIRE_DELEGATION_TOKEN: (1, 2),
    _K.DESCRIBE_DELEGATION_TOKEN: (1, 3),
    _K.DELETE_GROUPS: (0, 2),
    _K.ELECT_LEADERS: (0, 2),
    _K.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    _K.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    _K.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    _K.OFFSET_DELETE: (0, 0),
    _K.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    _K.ALTER_CLIENT_QUOTAS: (0, 1),
    _K.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    _K.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    _K.DESCRIBE_QUORUM: (0, 2),
    _K.UPDATE_FEATURES: (0, 2),
    _K.DESCRIBE_CLUSTER: (0, 2),
    _K.DESCRIBE_PRODUCERS: (0, 0),
    _K.UNREGISTER_BROKER: (0, 0),
    _K.DESCRIBE_TRANSACTIONS: (0, 0),
    _K.LIST_TRANSACTIONS: (0, 2),
    _K.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    _K.CONSUMER_GROUP_DESCRIBE: (0, 1),
    _K.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    _K.PUSH_TELEMETRY: (0, 0),
    _K.LIST_CONFIG_RESOURCES: (0, 1),
    _K.DESCRIBE_TOPIC_PARTITIONS: (0, 0),
    _K.SHARE_GROUP_HEARTBEAT: (1, 1),
    _K.SHARE_GROUP_DESCRIBE: (1, 1),
    _K.SHARE_FETCH: (1, 2),
    _K.SHARE_ACKNOWLEDGE: (1, 2),
    _K.ADD_RAFT_VOTER: (0, 1),
    _K.REMOVE_RAFT_VOTER: (0, 0),
    _K.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    _K.READ_SHARE_GROUP_STATE: (0, 0),
    _K.WRITE_SHARE_GROUP_STATE: (0, 1),
    _K.DELETE_SHARE_GROUP_STATE: (0, 0),
    _K.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
    _K.STREAMS_GROUP_HEARTBEAT: (0, 0),
    _K.STREAMS_GROUP_DESCRIBE: (0, 0),
    _K.DESCRIBE_SHARE_GROUP_OFFSETS: (0, 1),
    _K.ALTER_SHARE_GROUP_OFFSETS: (0, 0),
    _K.DELETE_SHARE_GROUP_OFFSETS: (0, 0),
}

# The lowest version our codecs (kio, or the hand-written produce decoder) can read.
_CODEC_MIN: Mapping[ApiKey, int] = {
    _K.PRODUCE: 0,
    _K.FETCH: 4,
    _K.LIST_OFFSETS: 1,
    _K.CREATE_TOPICS: 2,
    _K.DELETE_TOPICS: 1,
    _K.OFFSET_FOR_LEADER_EPOCH: 2,
    _K.DESCRIBE_CONFIGS: 1,
    _K.DESCRIBE_LOG_DIRS: 1,
    _K.OFFSET_COMMIT: 2,
    _K.OFFSET_FETCH: 1,
    _K.DESCRIBE_ACLS: 1,
    _K.CREATE_ACLS: 1,
    _K.DELETE_ACLS: 1,
    _K.ALTER_REPLICA_LOG_DIRS: 1,
    _K.CREATE_DELEGATION_TOKEN: 1,
    _K.RENEW_DELEGATION_TOKEN: 1,
    _K.EXPIRE_DELEGATION_TOKEN: 1,
    _K.DESCRIBE_DELEGATION_TOKEN: 1,
}


def supported_versions(api_keys: list[int] | set[int] | Mapping[int, object]) -> dict[ApiKey, tuple[int, int]]:
    """The widest range this node could serve for each given api key: from Kafka 3.9's lowest
    (older clients) to Kafka 4.2's highest, narrowed to what our codecs read.

    The ranges the node does serve are declared by its handlers (odradek.broker.handlers.*
    VERSIONS) and must lie inside this.
    """
    out: dict[ApiKey, tuple[int, int]] = {}
    for key in api_keys:
        k = ApiKey(key)
        lo, hi = KAFKA_39_VERSIONS.get(k, KAFKA_42_VERSIONS.get(k, (0, -1)))
        hi = max(hi, BEYOND_KAFKA_39.get(k, hi), KAFKA_42_VERSIONS.get(k, (0, hi))[1])
        out[k] = (max(lo, _CODEC_MIN.get(k, 0)), hi)
    return out


def is_flexible(api_key: int, version: int) -> bool:
    try:
        first = FIRST_FLEXIBLE_VERSION[api_key]  # type: ignore[index]
    except KeyError:
        # Unknown or newer api keys: every api added since Kafka 2.4 is flexible from v0.
        return True
    return first is not None and version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        # The only request that ever used header v0 (no client id).
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        # Always v0 so a client can read the error and the supported list of
        # a version it sent blindly.
        return 0
    return 1 if is_flexible(api_key, api_version) else 0
