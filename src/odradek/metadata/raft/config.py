"""`RaftConfig`: the quorum's controller.quorum.* settings, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's controller.quorum.* settings, with Kafka's defaults."""

    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_entries: int = 64
    # Kafka's follower long-polls the leader (fetch max wait 500 ms); without a purgatory here a
    # follower that got nothing new waits this long before asking again.
    fetch_idle_ms: int = 100
    # the leader holds a Fetch with nothing new this long (Kafka's raft fetch max wait), so an
    # idle follower asks about twice a second instead of spinning; 0 turns long polls off
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 1 << 20

    @property
    def check_quorum_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2
