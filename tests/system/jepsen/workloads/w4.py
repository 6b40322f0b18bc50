"""W4: write, then read back everything acknowledged after the faults heal.

While faults run, only producers (idempotent, acks=all) work; `final_reads`, called by the
harness once every fault has healed, reads every key from its beginning. An acknowledged value
missing from those reads is "unseen" (and "lost-write" when a later value was read)."""

from __future__ import annotations

import random
import threading

from ..env import Env
from ..history import History
from .clients import producer_loop
from .common import Workers, all_keys, ensure_topics, read_all, thread_rng


class W4:
    name = "w4"
    producers = 3

    def __init__(self, env: Env, history: History, rng: random.Random) -> None:
        self.env, self.history, self.rng = env, history, rng
        self.keys = all_keys(env)

    def run(self, stop: threading.Event) -> None:
        ensure_topics(self.env)
        w = Workers(self.history)
        for i in range(self.producers):
            rng = thread_rng(self.rng)
            w.start(
                f"w4-producer-{i}",
                lambda r=rng: producer_loop(self.env, self.history, r, self.keys, stop),
            )
        stop.wait()
        w.join()

    def final_reads(self) -> bool:
        return read_all(self.env, self.history, self.keys)
