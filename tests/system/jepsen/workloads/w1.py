"""W1: idempotent acks=all producers, with consumers that assign() and consumers that
subscribe() in one group. Checked for every anomaly; after heal, `final_reads` reads every
key back so unacknowledged loss shows as unseen."""

from __future__ import annotations

import random
import threading

from ..env import Env
from ..history import History
from .clients import assign_consumer_loop, producer_loop, subscribe_consumer_loop
from .common import Workers, all_keys, ensure_topics, read_all, thread_rng


class W1:
    name = "w1"
    producers = 2
    assigners = 1
    subscribers = 2

    def __init__(self, env: Env, history: History, rng: random.Random) -> None:
        self.env, self.history, self.rng = env, history, rng
        self.keys = all_keys(env)
        self.group = f"w1-{rng.getrandbits(32):08x}"

    def run(self, stop: threading.Event) -> None:
        ensure_topics(self.env)
        w = Workers(self.history)
        for i in range(self.producers):
            rng = thread_rng(self.rng)
            w.start(
                f"w1-producer-{i}",
                lambda r=rng: producer_loop(self.env, self.history, r, self.keys, stop),
            )
        for i in range(self.assigners):
            rng = thread_rng(self.rng)
            w.start(
                f"w1-assign-{i}",
                lambda r=rng: assign_consumer_loop(self.env, self.history, r, self.keys, stop),
            )
        for i in range(self.subscribers):
            rng = thread_rng(self.rng)
            w.start(
                f"w1-subscribe-{i}",
                lambda r=rng: subscribe_consumer_loop(self.env, self.history, r, self.group, stop),
            )
        stop.wait()
        w.join()

    def final_reads(self) -> bool:
        return read_all(self.env, self.history, self.keys)
