"""The client loops the workloads are made of: an idempotent producer, an assign() consumer
and a subscribe() consumer, each recording every operation in the history."""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from ..env import Env
from ..history import History, key_of, split_key
from .common import (
    CONSUMER,
    PRODUCER,
    Stuck,
    bounded,
    client_config,
    first_error,
    next_values,
    poll_value,
)

log = logging.getLogger(__name__)


def producer_loop(
    env: Env,
    h: History,
    rng: random.Random,
    keys: list[str],
    stop: threading.Event,
    extra: dict[str, str] | None = None,
) -> None:
    """Send 1-3 values to one key per op, wait for every delivery report, record ok with the
    offsets; an error in a report (or a flush that times out) is an unknown outcome: info, and
    the producer is replaced (a new process), since its order is no longer one sequence."""
    cfg = client_config(env, {**PRODUCER, **(extra or {})})
    process = h.new_process()
    p = Producer(cfg)
    try:
        while not stop.is_set():
            key = rng.choice(keys)
            topic, part = split_key(key)
            values = next_values(rng.randint(1, 3))
            invoke = [["send", key, v] for v in values]
            op = h.invoke(process, "send", invoke)
            reports: dict[int, tuple[int | None, str | None]] = {}

            def report(err: Any, msg: Any, reports: dict[int, Any] = reports) -> None:
                reports[int(msg.value())] = delivery(err, msg)

            enqueued = 0
            try:
                for v in values:
                    p.produce(topic, str(v).encode(), partition=part, on_delivery=report)
                    enqueued += 1
            except (BufferError, KafkaException) as exc:
                if enqueued == 0:
                    # not enqueued (local queue full, bad config): certainly not sent
                    h.fail(op, error=f"produce: {exc}")
                    continue
                p.flush(30)
                done = [["send", key, [reports.get(v, (None, None))[0], v]] for v in values]
                h.info(op, done, error=f"produce: {exc}")
                p, process = _replace(p, cfg, h)
                continue
            left = p.flush(30)
            done = [["send", key, [reports.get(v, (None, None))[0], v]] for v in values]
            errors = [e for _o, e in reports.values() if e]
            if left == 0 and not errors and len(reports) == len(values):
                h.ok(op, done)
            else:
                h.info(op, done, error=errors[0] if errors else f"{left} undelivered after flush")
                p, process = _replace(p, cfg, h)
    finally:
        p.flush(10)
        close_producer(p)


def delivery(err: Any, msg: Any) -> tuple[int | None, str | None]:
    """(offset, None) or (None, error name) from a delivery report. Called from inside
    librdkafka: an exception here would surface later from flush or commit as a SystemError,
    so nothing may raise."""
    if err is None:
        return (msg.offset(), None)
    try:
        return (None, str(err.name()))
    except Exception:
        return (None, "delivery error")


def close_producer(p: Producer) -> None:
    """Drop what is still queued and close now: a producer left to the garbage collector
    keeps reconnecting to a dead node in a tight loop, eating the CPU the nodes need."""
    with contextlib.suppress(KafkaException):
        p.purge()
        p.flush(5)
    with contextlib.suppress(KafkaException):
        p.close()


def _replace(p: Producer, cfg: dict[str, str], h: History) -> tuple[Producer, int]:
    close_producer(p)
    return Producer(cfg), h.new_process()


def assign_consumer_loop(
    env: Env, h: History, rng: random.Random, keys: list[str], stop: threading.Event
) -> None:
    """Assign a random subset of keys from their beginning and poll; every so often drop the
    client and start over as a new process (a fresh position)."""
    while not stop.is_set():
        process = h.new_process()
        mine = sorted(rng.sample(keys, max(1, len(keys) * 2 // 3)))
        c = Consumer(client_config(env, {**CONSUMER, "group.id": f"w-assign-{process}"}))
        try:
            op = h.invoke(process, "assign", mine)
            c.assign([TopicPartition(*split_key(k), OFFSET_BEGINNING) for k in mine])
            h.ok(op, mine)
            for _ in range(rng.randint(20, 200)):
                if stop.is_set():
                    break
                op = h.invoke(process, "poll", [["poll"]])
                try:
                    msgs = c.consume(200, 0.5)
                except KafkaException as exc:
                    h.fail(op, error=str(exc))
                    continue
                h.ok(op, [["poll", poll_value(msgs)]])
        finally:
            h.event(process, "crash", {"reason": "replaced"})
            c.close()


# confluent-kafka 2.x's synchronous Consumer.commit takes no timeout (librdkafka waits for
# the group coordinator as long as it takes, for good while `__consumer_offsets` has no
# leader: finding 6 of docs/reliability.md). It gets the clients' socket timeout plus
# STUCK_AFTER before the consumer is given up on; closes get the same.
COMMIT_TIMEOUT = 10.0
# An abandoned consumer's librdkafka threads go on heartbeating: without polls it leaves its
# group once this passes, as a crashed application's member leaves by its session timeout.
MAX_POLL_INTERVAL_MS = "60000"
# Commit errors that leave unknown whether the coordinator stored the offsets.
_COMMIT_UNKNOWN = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError.REQUEST_TIMED_OUT,
}


def subscribe_consumer_loop(
    env: Env,
    h: History,
    rng: random.Random,
    group: str,
    stop: threading.Event,
    consumer: Callable[[dict[str, str]], Consumer] = Consumer,
) -> None:
    """Subscribe to the topics in a shared group and poll; a poll that read something is
    followed by a synchronous commit of the consumer's positions, its own "commit" op (ok
    with the offsets; fail on a definite Kafka error, e.g. the group moved on, when the next
    owner starts from the last commit; info when its outcome is unknown). Rebalances seen
    during a poll are recorded in it, before its reads: ["rebalance", {"assigned": [...],
    "revoked": [...]}].

    A commit that does not return within COMMIT_TIMEOUT + STUCK_AFTER is recorded as info and
    its consumer abandoned, never closed (its handle is inside the stuck call; a close would
    stick behind it), and a new consumer joins the same group as a new process, as an
    application restarted by its supervisor would. `consumer` makes the clients (a test may
    give one whose commit never returns)."""
    cfg = client_config(
        env, {**CONSUMER, "group.id": group, "max.poll.interval.ms": MAX_POLL_INTERVAL_MS}
    )
    while not stop.is_set():
        process = h.new_process()
        c = consumer(cfg)
        moves: list[list[Any]] = []

        def assigned(_c: Any, parts: list[Any], moves: list[Any] = moves) -> None:
            moves.append(
                [
                    "rebalance",
                    {"assigned": [key_of(p.topic, p.partition) for p in parts], "revoked": []},
                ]
            )

        def revoked(_c: Any, parts: list[Any], moves: list[Any] = moves) -> None:
            moves.append(
                [
                    "rebalance",
                    {"assigned": [], "revoked": [key_of(p.topic, p.partition) for p in parts]},
                ]
            )

        stuck: str | None = None
        try:
            op = h.invoke(process, "subscribe", list(env.topics))
            c.subscribe(list(env.topics), on_assign=assigned, on_revoke=revoked)
            h.ok(op, list(env.topics))
            for _ in range(rng.randint(50, 400)):
                if stop.is_set():
                    break
                op = h.invoke(process, "poll", [["poll"]])
                try:
                    msgs = c.consume(200, 0.5)
                except KafkaException as exc:
                    value, moves[:] = [*moves], []
                    h.fail(op, value or None, error=str(exc))
                    continue
                got = poll_value(msgs)
                value, moves[:] = [*moves, ["poll", got]], []
                err = first_error(msgs)
                h.ok(op, value if err is None else [*value, ["error", err]])
                if got:
                    stuck = _commit(h, process, c)
                    if stuck is not None:
                        break
        finally:
            reason = "replaced" if stuck is None else f"abandoned: {stuck}"
            op = h.invoke(process, "crash", {"reason": reason})
            try:
                if stuck is None:
                    with contextlib.suppress(KafkaException, Stuck):
                        bounded("consumer close", COMMIT_TIMEOUT, c.close)
                else:
                    log.warning("W1 abandons a subscribe consumer of %s: %s", group, stuck)
            finally:
                h.ok(op, {"revoked": "all"})


def _commit(h: History, process: int, c: Consumer) -> str | None:
    """Commit c's positions (synchronously) as a "commit" op; why it was given up on, if so."""
    op = h.invoke(process, "commit")
    try:
        done = bounded("commit", COMMIT_TIMEOUT, lambda: c.commit(asynchronous=False))
    except Stuck as exc:
        h.info(op, error=str(exc))
        return str(exc)
    except KafkaException as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        name = str(err.name()) if err is not None else str(exc)
        if err is not None and err.code() not in _COMMIT_UNKNOWN:
            h.fail(op, error=name)
        else:
            h.info(op, error=name)
        return None
    h.ok(op, {key_of(tp.topic, tp.partition): tp.offset for tp in done or ()})
    return None
