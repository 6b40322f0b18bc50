"""The client loops the workloads are made of: an idempotent producer, an assign() consumer
and a subscribe() consumer, each recording every operation in the history."""

from __future__ import annotations

import contextlib
import random
import threading
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from ..env import Env
from ..history import History, key_of, split_key
from .common import CONSUMER, PRODUCER, client_config, first_error, next_values, poll_value


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


def subscribe_consumer_loop(
    env: Env, h: History, rng: random.Random, group: str, stop: threading.Event
) -> None:
    """Subscribe to the topics in a shared group and poll, committing each poll's offsets
    before recording it (as Jepsen's client does). Rebalances seen during a poll are recorded
    in it, before its reads: ["rebalance", {"assigned": [...], "revoked": [...]}]."""
    while not stop.is_set():
        process = h.new_process()
        c = Consumer(client_config(env, {**CONSUMER, "group.id": group}))
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
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        # the group moved on (a rebalance, a coordinator change): what was
                        # read stays read; the next owner starts from the last commit
                        pass
                err = first_error(msgs)
                h.ok(op, value if err is None else [*value, ["error", err]])
        finally:
            op = h.invoke(process, "crash", {"reason": "replaced"})
            try:
                c.close()
            finally:
                h.ok(op, {"revoked": "all"})
