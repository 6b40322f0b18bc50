"""W2: transactional consume-transform-produce, read with read_committed.

Each worker owns a transactional producer (its own transactional.id) and a read_committed
consumer subscribed, in one group, to the workload's topics. One "txn" op is one Kafka
transaction: poll a batch, send 1-3 new values to random keys, add the consumer's positions
to the transaction (send_offsets_to_transaction) and commit.

Outcomes: ok when commit_transaction returned; fail when the transaction certainly did not
commit: it failed before commit was asked for (only EndTxn(commit) commits a Kafka
transaction) or commit failed and abort_transaction then succeeded; info otherwise (the
commit's fate is unknown). After a fail the consumer seeks back to the group's committed
offsets, as an application must; after an info both clients are replaced (a new process) and
the new producer's init_transactions fences the old one, finishing its transaction either way.

A transactional call that overruns its timeout by STUCK_AFTER is given up on (`bounded`):
librdkafka's send_offsets_to_transaction ignores its timeout while it waits for a group
coordinator (librdkafka #5456), and waits for good when that coordinator's node left the
cluster's metadata, as a killed node does once fenced (#5511): the call never returns. Its
transaction was never asked to commit when it sticks before commit (fail), its fate is unknown
when commit itself sticks (info); either way the producer is abandoned, never closed (its
handle is in use by the stuck call), and the next producer's init_transactions with the same
transactional.id fences it.
The op's value keeps the polls even when it failed (they are what the consumer saw) and the
sends with the offsets their delivery reports gave.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from ..env import Env
from ..history import History, key_of, split_key
from .clients import close_producer, delivery
from .common import (
    CONSUMER,
    PRODUCER,
    Stuck,
    Workers,
    all_keys,
    bounded,
    client_config,
    ensure_topics,
    next_values,
    poll_value,
    read_all,
    thread_rng,
)

log = logging.getLogger(__name__)

TXN_TIMEOUT = 20.0


class _Abortable(Exception):
    """The transaction failed before commit was asked for."""


class W2:
    name = "w2"
    workers = 2

    def __init__(self, env: Env, history: History, rng: random.Random) -> None:
        self.env, self.history, self.rng = env, history, rng
        self.keys = all_keys(env)
        tag = f"{rng.getrandbits(32):08x}"
        self.group = f"w2-{tag}"
        # one transactional.id per worker (a harness may choose them, e.g. to place their
        # coordinators)
        self.txn_ids = [f"w2-{tag}-{i}" for i in range(self.workers)]

    def run(self, stop: threading.Event) -> None:
        ensure_topics(self.env)
        w = Workers(self.history)
        for i in range(self.workers):
            rng = thread_rng(self.rng)
            w.start(f"w2-worker-{i}", lambda i=i, r=rng: self._worker(i, r, stop))
        stop.wait()
        w.join(180)

    def final_reads(self) -> bool:
        return read_all(self.env, self.history, self.keys, isolation="read_committed")

    # ------------------------------------------------------------------ one worker

    def _clients(self, i: int) -> tuple[Producer, Consumer, list[list[Any]]]:
        p = Producer(
            client_config(
                self.env,
                {
                    **PRODUCER,
                    "transactional.id": self.txn_ids[i],
                    "transaction.timeout.ms": "30000",
                },
            )
        )
        moves: list[list[Any]] = []

        def assigned(_c: Any, parts: list[Any]) -> None:
            moves.append(
                [
                    "rebalance",
                    {"assigned": [key_of(x.topic, x.partition) for x in parts], "revoked": []},
                ]
            )

        def revoked(_c: Any, parts: list[Any]) -> None:
            moves.append(
                [
                    "rebalance",
                    {"assigned": [], "revoked": [key_of(x.topic, x.partition) for x in parts]},
                ]
            )

        c = Consumer(
            client_config(
                self.env, {**CONSUMER, "group.id": self.group, "isolation.level": "read_committed"}
            )
        )
        c.subscribe(list(self.env.topics), on_assign=assigned, on_revoke=revoked)
        return p, c, moves

    def _worker(self, i: int, rng: random.Random, stop: threading.Event) -> None:
        h = self.history
        while not stop.is_set():
            process = h.new_process()
            op = h.invoke(process, "init", {"transactional.id": self.txn_ids[i]})
            p, c, moves = self._clients(i)
            stuck: str | None = None
            try:
                bounded("init_transactions", TXN_TIMEOUT, p.init_transactions, TXN_TIMEOUT)
            except (KafkaException, Stuck) as exc:
                h.info(op, error=str(exc))
                self._close(c, p, None if isinstance(exc, KafkaException) else str(exc))
                continue
            h.ok(op, op.value)
            try:
                while not stop.is_set():
                    if not self._txn(process, p, c, moves, rng):
                        break  # unknown outcome: new clients, new process
            except Stuck as exc:
                stuck = str(exc)  # the op is recorded; the producer is left to its call
            finally:
                reason = "replaced" if stuck is None else f"abandoned: {stuck}"
                crash = h.invoke(process, "crash", {"reason": reason})
                self._close(c, p, stuck)
                h.ok(crash, crash.value)

    @staticmethod
    def _close(c: Consumer, p: Producer, stuck: str | None) -> None:
        """Close both clients, except a producer abandoned inside a stuck call. A fenced or
        fatally failed producer raises from flush and close alike: it is being thrown away
        either way. A close that does not return is left behind too."""
        with contextlib.suppress(KafkaException, Stuck):
            bounded("consumer close", TXN_TIMEOUT, c.close)
        if stuck is not None:
            log.warning("W2 abandons a transactional producer: %s", stuck)
            return
        with contextlib.suppress(KafkaException, Stuck):
            bounded("producer close", TXN_TIMEOUT, close_producer, p)

    def _txn(
        self, process: int, p: Producer, c: Consumer, moves: list[list[Any]], rng: random.Random
    ) -> bool:
        """One transaction; False when the clients must be replaced."""
        h = self.history
        n = rng.randint(1, 3)
        sends = [[rng.choice(self.keys), v] for v in next_values(n)]
        op = h.invoke(process, "txn", [["poll"], *[["send", k, v] for k, v in sends]])
        reports: dict[int, tuple[int | None, str | None]] = {}
        got: dict[str, list[list[int]]] = {}

        def report(err: Any, msg: Any) -> None:
            reports[int(msg.value())] = delivery(err, msg)

        def value() -> list[Any]:
            done = [["send", k, [reports.get(v, (None, None))[0], v]] for k, v in sends]
            taken, moves[:] = [*moves], []
            return [*taken, ["poll", got], *done]

        committing = False
        try:
            try:
                p.begin_transaction()
                msgs = c.consume(100, 0.5)
                got = poll_value(msgs)
                for k, v in sends:
                    topic, part = split_key(k)
                    p.produce(topic, str(v).encode(), partition=part, on_delivery=report)
                positions = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
                if positions:
                    bounded(
                        "send_offsets_to_transaction",
                        TXN_TIMEOUT,
                        p.send_offsets_to_transaction,
                        positions,
                        c.consumer_group_metadata(),
                        TXN_TIMEOUT,
                    )
            except (KafkaException, BufferError) as exc:
                raise _Abortable(str(exc)) from exc
            committing = True
            bounded("commit_transaction", TXN_TIMEOUT, p.commit_transaction, TXN_TIMEOUT)
            h.ok(op, value())
            return True
        except Stuck as exc:
            # never asked to commit: it cannot have committed; a stuck commit: unknown
            if committing:
                h.info(op, value(), error=f"commit: {exc}")
            else:
                h.fail(op, value(), error=str(exc))
            raise
        except SystemError as exc:
            # an error librdkafka raised through a callback: what became of the transaction
            # is unknown, the clients are replaced
            h.info(op, value(), error=f"{'commit' if committing else 'txn'}: {exc}")
            return False
        except (_Abortable, KafkaException) as exc:
            err = _describe(exc)
            if committing and not _abortable(exc):
                h.info(op, value(), error=f"commit: {err}")
                return False
            try:
                bounded("abort_transaction", TXN_TIMEOUT, p.abort_transaction, TXN_TIMEOUT)
            except (KafkaException, Stuck) as abort_exc:
                if committing:
                    h.info(op, value(), error=f"commit: {err}; abort: {_describe(abort_exc)}")
                else:
                    # never asked to commit: it cannot have committed, whatever abort says
                    h.fail(op, value(), error=f"{err}; abort: {_describe(abort_exc)}")
                if isinstance(abort_exc, Stuck):
                    raise
                return False
            h.fail(op, value(), error=err)
            return self._rewind(c)

    def _rewind(self, c: Consumer) -> bool:
        """Seek back to the group's committed offsets so the aborted input is read again."""
        try:
            assignment = c.assignment()
            if assignment:
                for tp in c.committed(assignment, timeout=TXN_TIMEOUT):
                    if tp.offset >= 0:
                        c.seek(tp)
                    else:
                        return False  # nothing committed yet: start over from the reset policy
            return True
        except KafkaException:
            return False


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return str(exc)


def _abortable(exc: BaseException) -> bool:
    """A commit that failed in a way librdkafka says must be aborted: it did not commit."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return bool(exc.args[0].txn_requires_abort())
    return False
