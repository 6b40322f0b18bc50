"""The transaction coordinator's settings, from the broker's config (Kafka's names and
defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TxnConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    abort_check_interval_ms: int = 10000
    id_expiration_ms: int = 604800000
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_ms: int = 600000

    @classmethod
    def from_broker_config(cls, config: Any) -> TxnConfig:
        def get(name: str, default: int) -> int:
            try:
                return int(config.get_int(name))
            except Exception:
                raw = getattr(config, "values", {}).get(name)
                return int(raw) if raw is not None else default

        return cls(get("transaction.state.log.num.partitions", 50),
                   get("transaction.max.timeout.ms", 900000),
                   get("transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000),
                   get("transactional.id.expiration.ms", 604800000),
                   get("producer.id.expiration.ms", 86400000),
                   get("producer.id.expiration.check.interval.ms", 600000))
