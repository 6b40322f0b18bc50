"""The rules a new topic or partition must pass: Kafka's topic-name rules, the name-collision
key, the validation of a manual replica assignment, and the placement of replicas when none
is given. Pure functions of the image: the controller calls them before writing anything."""

from __future__ import annotations

import random
import re

from odradek.metadata.image import MetadataImage
from odradek.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "MAX_TOPIC_NAME_LENGTH",
    "collision_key",
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
    live: list[int], rng: random.Random, num_partitions: int, rf: int, first: int
) -> list[list[int]]:
    """Kafka's round-robin placement over the live brokers from a random start; partition
    `first + p` starts one broker further than partition `first + p - 1`."""
    if rf > len(live):
        raise KafkaError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {rf} time(s): The target replication factor "
            f"of {rf} cannot be reached because only {len(live)} broker(s) are registered.",
        )
    start = rng.randrange(len(live))
    return [
        [live[(start + first + p + i) % len(live)] for i in range(rf)]
        for p in range(num_partitions)
    ]


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
