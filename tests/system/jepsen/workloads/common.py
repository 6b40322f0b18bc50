"""What the workloads share: client settings, unique values, topic setup, the final read-back,
the worker-thread plumbing and `bounded`, the guard against client calls that never return."""

from __future__ import annotations

import itertools
import json
import logging
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from ..env import Env
from ..history import History, key_of, split_key

log = logging.getLogger(__name__)

# Values are unique per key across the run, and increasing per producer: one counter for
# every workload in this process gives both.
_values = itertools.count(1)
_values_lock = threading.Lock()


def next_values(n: int) -> list[int]:
    with _values_lock:
        return [next(_values) for _ in range(n)]


# Timeouts short enough that a client under a fault reports an unknown outcome (info) within a
# run, instead of hanging in librdkafka's 5-minute defaults. The harness may override any.
PRODUCER = {
    "acks": "all",
    "enable.idempotence": "true",
    "message.timeout.ms": "15000",
    "request.timeout.ms": "5000",
    "linger.ms": "2",
}
CONSUMER = {
    "enable.auto.commit": "false",
    "auto.offset.reset": "earliest",
    "session.timeout.ms": "10000",
    "heartbeat.interval.ms": "1000",
    "enable.partition.eof": "false",
}
ADMIN_TIMEOUT = 30.0
# Empty polls in a row after which a final read takes a partition short of its end offset as
# ending in records a read_committed consumer never returns.
QUIET_POLLS = 10


def client_config(env: Env, base: dict[str, str], admin: bool = False) -> dict[str, str]:
    return {
        "bootstrap.servers": env.admin_bootstrap if admin else env.bootstrap,
        "socket.timeout.ms": "10000",
        **base,
        **env.client_config,
    }


def all_keys(env: Env) -> list[str]:
    return [key_of(t, p) for t in env.topics for p in range(env.partitions)]


def ensure_topics(env: Env, config: dict[str, str] | None = None, timeout: float = 90.0) -> None:
    """Create the workload's topics (RF from the env, min.insync.replicas=2) unless they
    exist, and wait until a broker's metadata lists every partition with a leader."""
    admin = AdminClient(client_config(env, {}, admin=True))
    cfg = {"min.insync.replicas": "2", **(config or {})}
    rf = env.replication_factor
    futures = admin.create_topics([NewTopic(t, env.partitions, rf, config=cfg) for t in env.topics])
    for fut in futures.values():
        try:
            fut.result(ADMIN_TIMEOUT)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(timeout=10)
        ready = all(
            t in md.topics
            and md.topics[t].error is None
            and len(md.topics[t].partitions) == env.partitions
            and all(p.leader >= 0 for p in md.topics[t].partitions.values())
            for t in env.topics
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {env.topics} not ready after {timeout} s")
        time.sleep(0.2)


def poll_value(msgs: list[Any]) -> dict[str, list[list[int]]]:
    """Messages of one poll as {key: [[offset, value], ...]} (in the order returned)."""
    out: dict[str, list[list[int]]] = {}
    for m in msgs:
        if m.error() is not None:
            continue
        out.setdefault(key_of(m.topic(), m.partition()), []).append([m.offset(), int(m.value())])
    return out


def first_error(msgs: list[Any]) -> str | None:
    for m in msgs:
        if m.error() is not None:
            return str(m.error().name())
    return None


def read_all(
    env: Env,
    history: History,
    keys: list[str] | None = None,
    isolation: str = "read_committed",
    timeout: float = 180.0,
) -> bool:
    """Read back every key from the beginning up to its end offset at the start of the read,
    recording each batch as a "final-poll" op. Retries with a fresh client (a new process)
    until the deadline; True when everything up to the end offsets was read."""
    keys = [k for k in (keys if keys is not None else all_keys(env)) if k not in env.offline]
    deadline = time.monotonic() + timeout
    done: set[str] = set()
    while time.monotonic() < deadline and len(done) < len(keys):
        process = history.new_process()
        c = Consumer(
            client_config(
                env, {**CONSUMER, "group.id": f"final-{process}", "isolation.level": isolation}
            )
        )
        try:
            todo = [k for k in keys if k not in done]
            ends: dict[str, int] = {}
            for k in todo:
                topic, part = split_key(k)
                _low, high = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
                ends[k] = high
            op = history.invoke(process, "assign", todo)
            c.assign([TopicPartition(*split_key(k), OFFSET_BEGINNING) for k in todo])
            history.ok(op, todo)
            quiet = 0
            while time.monotonic() < deadline:
                pending = [k for k in todo if k not in done]
                if not pending:
                    break
                op = history.invoke(process, "final-poll", [["poll"]])
                msgs = c.consume(500, 1.0)
                got = poll_value(msgs)
                history.ok(op, [["poll", got]])
                quiet = 0 if any(k in got for k in pending) else quiet + 1
                for k in pending:
                    topic, part = split_key(k)
                    pos = c.position([TopicPartition(topic, part)])[0].offset
                    # read_committed never returns transaction markers or aborted records, so
                    # a partition ending in them is done at its last stable offset, or when
                    # it has stayed quiet at a known position
                    reached = ends[k] == 0 or pos >= ends[k]
                    stable = pos >= 0 and _stable_end(c, topic, part) <= pos
                    if reached or stable or quiet >= QUIET_POLLS:
                        done.add(k)
        except KafkaException as exc:
            history.event(process, "crash", {"error": str(exc)})
            time.sleep(0.5)
        finally:
            c.close()
    return len(done) == len(keys)


def _stable_end(c: Consumer, topic: str, part: int) -> int:
    # With read_committed, the high watermark a consumer may reach is the LSO; librdkafka
    # reports it as the high end of the cached watermarks.
    _low, high = c.get_watermark_offsets(TopicPartition(topic, part), cached=True)
    return int(high)


# How long past its own timeout a client call may take before the worker gives up on it.
STUCK_AFTER = 30.0


class Stuck(Exception):
    """A client call did not return within its timeout plus STUCK_AFTER: the client is
    abandoned (it is still inside that call, on a helper thread) and never closed."""


def bounded(what: str, timeout: float, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) on a helper thread; its result or exception, or Stuck after timeout +
    STUCK_AFTER. Some librdkafka calls ignore their timeout or have none (W2's
    send_offsets_to_transaction, librdkafka #5456/#5511; W1's synchronous Consumer.commit,
    which confluent-kafka 2.x gives no timeout at all) and wait for good when the coordinator
    they need never comes back. A daemon thread: one that never returns does not keep the
    process alive."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def call() -> None:
        try:
            box["result"] = fn(*args)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    name = f"{threading.current_thread().name}:{what}"
    threading.Thread(target=call, name=name, daemon=True).start()
    if not done.wait(timeout + STUCK_AFTER):
        raise Stuck(f"{what} did not return within {timeout + STUCK_AFTER:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("result")


class WorkersStuck(RuntimeError):
    """Worker threads still running after `stop` and the join deadline. The message names
    them; `dump` holds every thread's Python stack and each stuck worker's last ops."""

    def __init__(self, alive: list[str], dump: str) -> None:
        super().__init__(f"workload threads did not stop: {alive}\n{dump}")
        self.alive, self.dump = alive, dump


class Workers:
    """Named worker threads that run a loop until `stop`; an exception escaping a loop (a
    workload bug, not a fault: faults are caught per op) is kept and raised by `join`.
    `history` (optional) lets a join that times out say what the stuck workers last did."""

    def __init__(self, history: History | None = None) -> None:
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.history = history

    def start(self, name: str, fn: Callable[[], None]) -> None:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:
                log.exception("worker %s died", name)
                self.errors.append(exc)

        t = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(t)
        t.start()

    def join(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        if self.errors:
            raise RuntimeError(f"workload threads failed: {self.errors!r}") from self.errors[0]
        if alive:
            dump = stuck_report(alive, self.history)
            log.error("workload threads did not stop: %s\n%s", [t.name for t in alive], dump)
            raise WorkersStuck([t.name for t in alive], dump)


def stuck_report(stuck: list[threading.Thread], history: History | None) -> str:
    """Every live thread's Python stack (the stuck ones first, each with its last history
    ops): where a worker blocks inside a client call shows as that call's frame."""
    frames = sys._current_frames()
    names = {t.ident: t.name for t in threading.enumerate()}
    first = [t.ident for t in stuck]
    out: list[str] = []
    for ident in [*first, *(i for i in frames if i not in first)]:
        frame = frames.get(ident) if ident is not None else None
        if frame is None:
            continue
        name = names.get(ident, f"thread {ident}")
        out.append(f"--- {name}{' (stuck)' if ident in first else ''}")
        out.append("".join(traceback.format_stack(frame)).rstrip())
        if ident in first and history is not None:
            out.append("  last ops:")
            out += [f"    {json.dumps(op.to_dict(), default=str)[:400]}"
                    for op in history.thread_ops(name)]
    return "\n".join(out)


def thread_rng(rng: random.Random) -> random.Random:
    # random.Random is not safe to share between threads; each worker gets its own, seeded
    # from the workload's so a seed still fixes every choice a worker makes.
    return random.Random(rng.getrandbits(64))
