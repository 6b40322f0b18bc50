"""The rules a new topic or partition must pass: Kafka's topic-name rules, the name-collision
key, the validation of a manual replica assignment, and the placement of replicas when none
is given. Pure functions of the image: the controller calls them before writing anything."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence

from odradek.metadata.image import MetadataImage
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "collision_key",
    "internal_topic_replication_factor",
    "place_replicas",
    "validate_assignment",
    "validate_topic_name",
]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: raises INVALID_TOPIC_EXCEPTION."""
    if not name:
        raise KafkaError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name}",
        )
    if not _LEGAL_TOPIC.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def collision_key(name: str) -> str:
    return name.replace(".", "_")


def place_replicas(
    live: Sequence[int], rng: random.Random, num_partitions: int, rf: int, first: int,
    racks: Mapping[int, str | None] | None = None,
) -> list[list[int]]:
    """Kafka's replica assignment (AdminUtils) over the active brokers: leaders round-robin
    from a random start, followers shifted by a random amount that grows by one every full
    round, so partition `first + p` starts one broker further than `first + p - 1`. When any
    broker has a rack the broker list alternates racks and each partition's replicas take a
    rack each until every rack holds one (a broker without a rack counts as its own rack
    named ''). INVALID_REPLICATION_FACTOR when rf exceeds the brokers."""
    brokers = sorted(live)
    if rf > len(brokers):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {rf} time(s): The target replication factor "
            f"of {rf} cannot be reached because only {len(brokers)} broker(s) are registered.",
        )
    if not brokers:
        return []
    rack_of = {b: (racks or {}).get(b) or "" for b in brokers}
    rack_aware = any(rack_of.values())
    if rack_aware:
        brokers = _rack_alternated(rack_of)
    n = len(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    num_racks = len(set(rack_of.values()))
    out: list[list[int]] = []
    for pid in range(max(0, first), max(0, first) + num_partitions):
        if pid > 0 and pid % n == 0:
            shift += 1
        first_index = (pid + start) % n
        leader = brokers[first_index]
        replicas = [leader]
        if not rack_aware:
            replicas += [brokers[_replica_index(first_index, shift, j, n)] for j in range(rf - 1)]
        else:
            used_racks, k = {rack_of[leader]}, 0
            while len(replicas) < rf:
                broker = brokers[_replica_index(first_index, shift * num_racks, k, n)]
                k += 1
                rack = rack_of[broker]
                if ((rack not in used_racks or len(used_racks) == num_racks)
                        and (broker not in replicas or len(replicas) == n)):
                    replicas.append(broker)
                    used_racks.add(rack)
        out.append(replicas)
    return out


def _replica_index(first_index: int, shift: int, index: int, n: int) -> int:
    return (first_index + 1 + (shift + index) % (n - 1)) % n


def _rack_alternated(rack_of: Mapping[int, str]) -> list[int]:
    """Brokers ordered one rack at a time (racks sorted, brokers sorted in each rack)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(rack_of):
        by_rack.setdefault(rack_of[broker], []).append(broker)
    order = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(b) for b in order)):
        out += [b[i] for b in order if i < len(b)]
    return out


def internal_topic_replication_factor(wanted: int, active_brokers: int,
                                      single_node: bool) -> int:
    """The replication factor to create __consumer_offsets / __transaction_state with
    (offsets.topic.replication.factor, transaction.state.log.replication.factor, default 3).

    Kafka 4 enforces the factor (KIP-115, since 0.11): with fewer live brokers the creation
    fails with INVALID_REPLICATION_FACTOR and FindCoordinator answers COORDINATOR_NOT_AVAILABLE
    until enough brokers have registered, so a starting cluster never gets an internal topic
    with fewer replicas than configured. odradek does the same in a cluster, and caps the
    factor only for a single node with no quorum configured (`odradek serve` out of the box),
    which can never have more brokers and would otherwise have no coordinator at all."""
    if single_node:
        return max(1, min(wanted, active_brokers))
    return wanted


def validate_assignment(
    image: MetadataImage, assignment: list[list[int]], expected_rf: int | None
) -> None:
    """A manual assignment: each replica list non-empty, without repeats, of registered
    brokers, all of one length (`expected_rf` when given), with a live broker in each."""
    registered = image.brokers
    live = set(image.live_brokers())
    for index, replicas in enumerate(assignment):
        if not replicas:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                "The manual partition assignment includes an empty replica list.",
            )
        seen: set[int] = set()
        for broker in replicas:
            if broker in seen:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes the broker {broker} "
                    "more than once.",
                )
            seen.add(broker)
            if broker not in registered:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker {broker}, but no "
                    "such broker is registered.",
                )
        if expected_rf is None:
            expected_rf = len(replicas)
        elif len(replicas) != expected_rf:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes a partition with "
                f"{len(replicas)} replica(s), but this is inconsistent with previous "
                f"partitions, which have {expected_rf} replica(s).",
            )
        if not seen & live:
            raise KafkaError(
                ErrorCode.invalid_replica_assignment,
                f"All brokers specified in the manual partition assignment for partition "
                f"{index} are fenced or in controlled shutdown.",
            )
