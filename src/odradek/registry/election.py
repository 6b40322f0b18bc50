"""One writer per cluster: the registry instances join one consumer group on `_schemas`, and
the member assigned its only partition is the leader. A follower finds the leader's URL in the
group's description (each member's client.id is its advertised URL) and forwards writes there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

GROUP = "odradek-schema-registry"


class Election:
    def __init__(self, bootstrap: str, topic: str, url: str, group: str = GROUP,
                 timeout: float = 30.0, eligible: bool = True,
                 client: Mapping[str, object] | None = None) -> None:
        self.eligible = eligible
        self.client: dict[str, object] = dict(client or {})  # TLS/SASL, as the store's
        self.bootstrap = bootstrap
        self.topic = topic
        self.url = url
        self.group = group
        self.timeout = timeout
        self.is_leader = False
        # Bumped at every assignment and revocation: a writer that caught up in this term and is
        # still the leader in it knows no other instance has written since.
        self.term = 0
        self.joined = threading.Event()
        self._stop = threading.Event()
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self._admin: Any = None

    def start(self) -> None:
        from odradek.client import admin_client, consumer

        self._admin = admin_client(self.bootstrap, self.client)
        if not self.eligible:  # leader.eligibility=false: never joins, always forwards
            self.joined.set()
            return
        # Records are not what this consumer is for: start at the end and commit nothing.
        self._consumer = consumer(self.bootstrap, {
            **self.client, "group.id": self.group, "client.id": self.url, "auto.offset.reset": "latest",
            "enable.auto.commit": False, "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000})
        self._consumer.subscribe([self.topic], on_assign=self._assigned,
                                 on_revoke=self._revoked)
        self._thread = threading.Thread(target=self._loop, name="registry-election", daemon=True)
        self._thread.start()

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.term += 1
        self.is_leader = any(p.partition == 0 for p in partitions)
        self.joined.set()
        log.info("registry %s is %s", self.url, "the leader" if self.is_leader else "a follower")

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self.term += 1
        self.is_leader = False

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.5)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()  # leaves the group: another instance takes over at once

    def leader_url(self) -> str | None:
        """The leader's URL, or None while the group has none (a rebalance)."""
        if self.is_leader:
            return self.url
        future = self._admin.describe_consumer_groups([self.group],
                                                      request_timeout=self.timeout)[self.group]
        description = future.result(timeout=self.timeout)
        for member in description.members:
            parts = member.assignment.topic_partitions if member.assignment else []
            if any(p.topic == self.topic and p.partition == 0 for p in parts):
                return str(member.client_id)
        return None

    def wait_leader_url(self) -> str | None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            url = self.leader_url() if self.joined.is_set() else None
            if url:
                return url
            time.sleep(0.2)
        return None
