"""`odradek consume TOPIC`: read records and print them (JSON lines or a --format)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    client_overrides,
    fail,
    kafka_error_text,
    kafka_errors,
    reach,
    usage,
)
from odradek.cli.format import ConsumedRecord, FormatError, compile_format, json_line
from odradek.client.consumer_settings import settings_text

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message, TopicPartition

BATCH = 1000


def fatal_errors() -> frozenset[int]:
    """Errors after which reading on cannot succeed: the tool stops with a non-zero exit.
    (A function: confluent-kafka loads only when a command reads.)"""
    from confluent_kafka import KafkaError

    return frozenset({
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.OFFSET_OUT_OF_RANGE,
        KafkaError._AUTO_OFFSET_RESET,
    })


@dataclass(frozen=True)
class StartOffset:
    """Where to start: a kind (`oldest`, `newest`, `exact`, `from_end`, `timestamp`) and a number."""

    kind: str
    value: int = 0


def parse_offset(text: str) -> StartOffset:
    """rpk/kcat-style start offsets: oldest|start|beginning, newest|end, N, -N (N before the
    end), @MS (the first record at or after a timestamp in ms)."""
    t = text.strip().lower()
    if t in ("oldest", "start", "beginning", "earliest"):
        return StartOffset("oldest")
    if t in ("newest", "end", "latest"):
        return StartOffset("newest")
    try:
        if t.startswith("@"):
            return StartOffset("timestamp", int(t[1:]))
        n = int(t)
    except ValueError:
        raise ValueError(
            f"bad offset {text!r}: use oldest, newest, N, -N (N before the end) or @timestamp_ms"
        ) from None
    if t.startswith("-"):
        return StartOffset("from_end", -n)
    return StartOffset("exact", n)


def to_record(msg: Message) -> ConsumedRecord:
    _, ts = msg.timestamp()
    return ConsumedRecord(msg.topic(), msg.partition(), msg.offset(), ts, msg.key(), msg.value(),
                          msg.headers() or ())


def consume(
    topic: str = typer.Argument(..., help="Topic to read."),
    from_beginning: bool = typer.Option(False, "--from-beginning",
                                        help="Start at the oldest record (same as --offset oldest)."),
    offset: str | None = typer.Option(
        None, "-o", "--offset", metavar="OFFSET",
        help="Start at oldest, newest, N, -N (N before the end) or @timestamp_ms."),
    partition: list[int] = typer.Option([], "-p", "--partition", metavar="N",
                                        help="Read only this partition (repeatable)."),
    num: int | None = typer.Option(None, "-n", "--num", metavar="N", help="Stop after this many records."),
    fmt: str | None = typer.Option(
        None, "-f", "--format", metavar="FORMAT",
        help="rpk-style: %t topic, %k key, %v value, %p partition, %o offset, %d timestamp, "
             "%h headers, %T/%K/%V lengths; \\n \\t escapes. Default: JSON lines."),
    exit_at_end: bool = typer.Option(False, "-e", "--exit-at-end",
                                     help="Stop once every partition's current end is reached."),
    group: str | None = typer.Option(
        None, "-g", "--group", metavar="GROUP",
        help="Join this consumer group: partitions are shared with its other members and "
             "progress is committed (starts at the committed offsets, else at --from-beginning "
             "or the end)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Read records from a topic; follows new records until Ctrl-C unless -n or -e."""
    from odradek.client import consumer as make_consumer

    if from_beginning and offset is not None:
        usage("give either --from-beginning or --offset, not both")
    if num is not None and num < 0:
        usage("--num must not be negative")
    if any(p < 0 for p in partition):
        usage(f"--partition must not be negative, not {min(partition)}")
    if group is not None and (offset is not None or partition):
        usage("--group cannot be combined with --offset or --partition: a group member reads "
              "what the group assigns it, from the committed offsets")
    try:
        start = parse_offset(offset) if offset is not None else \
            StartOffset("oldest" if from_beginning else "newest")
        render: Callable[[ConsumedRecord], bytes] = json_line if fmt is None else \
            compile_format(fmt).render
    except (ValueError, FormatError) as exc:
        usage(str(exc))
    overrides = client_overrides(client_config, command_config)
    reach(bootstrap, overrides)
    out = sys.stdout.buffer
    if group is not None:
        _consume_in_group(bootstrap, overrides, topic, group, from_beginning, render, out,
                          num, exit_at_end)
        return
    with kafka_errors():
        cons = make_consumer(bootstrap, overrides, enable_partition_eof=exit_at_end)
        try:
            assignment = _assignment(cons, topic, partition, start)
            cons.assign(assignment)
            _read(cons, render, out, num, {tp.partition for tp in assignment}, exit_at_end)
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            # The reader went away (`| head`); nothing more to say.
            sys.stderr.close()
        finally:
            cons.close()


consume.__doc__ = (
    "Read records from a topic; follows new records until Ctrl-C unless -n or -e. "
    "Fetch settings applied: " + settings_text() + " (-X key=value overrides any of them).")


def _consume_in_group(bootstrap: str, overrides: dict[str, object], topic: str, group: str,
                      from_beginning: bool, render: Callable[[ConsumedRecord], bytes],
                      out: object, num: int | None, exit_at_end: bool) -> None:
    """Subscribe as a member of `group`; commit what was written out (at least once)."""
    from odradek.client import consumer as make_consumer

    assigned: set[int] = set()

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assigned.update(tp.partition for tp in partitions)

    def on_revoke(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        assigned.difference_update(tp.partition for tp in partitions)

    with kafka_errors():
        # offsets are stored only for records written out, then auto-committed
        cons = make_consumer(bootstrap, overrides, group_id=group,
                             enable_auto_commit=True, enable_auto_offset_store=False,
                             auto_offset_reset="earliest" if from_beginning else "latest",
                             enable_partition_eof=exit_at_end)
        try:
            cons.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
            _read(cons, render, out, num, assigned, exit_at_end, store=True)
        except KeyboardInterrupt:
            pass
        except BrokenPipeError:
            sys.stderr.close()
        finally:
            try:
                cons.commit(asynchronous=False)
            except Exception:  # nothing stored yet, or the group is gone: nothing to commit
                pass
            cons.close()


def _assignment(cons: Consumer, topic: str, wanted: list[int], start: StartOffset,
                ) -> list[TopicPartition]:
    from confluent_kafka import TopicPartition

    metadata = cons.list_topics(topic, timeout=30)
    meta = metadata.topics.get(topic)
    if meta is None:
        fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic} not found")
    if meta.error is not None:
        fail(f"topic {topic}: {kafka_error_text(meta.error)}")
    existing = sorted(meta.partitions)
    if not existing:
        fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic} has no partitions")
    partitions = sorted(set(wanted)) if wanted else existing
    missing = [p for p in partitions if p not in meta.partitions]
    if missing:
        fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic} has no partition {missing[0]} "
             f"(partitions 0..{existing[-1]})")
    return [TopicPartition(topic, p, _start_offset(cons, topic, p, start)) for p in partitions]


def _start_offset(cons: Consumer, topic: str, partition: int, start: StartOffset) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

    if start.kind == "oldest":
        return OFFSET_BEGINNING
    if start.kind == "newest":
        return OFFSET_END
    if start.kind == "exact":
        return start.value
    if start.kind == "from_end":
        low, high = cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        return max(low, high - start.value)
    found = cons.offsets_for_times([TopicPartition(topic, partition, start.value)], timeout=30)
    # No record at or after the timestamp: Kafka answers -1; start at the end.
    return found[0].offset if found[0].offset >= 0 else OFFSET_END


class MessageRecord:
    """A consumed Message read as the ConsumedRecord the renderers take, field by field on
    demand. Building a frozen ConsumedRecord per record (six accessor calls and seven
    attribute sets) was the largest single cost of `odradek consume` (bench/consumer_bounds.py:
    py-spy put a quarter of the process in to_record); a format such as `%v\\n` reads one
    field, so the others are never fetched."""

    __slots__ = ("_m",)

    def __init__(self, msg: Message) -> None:
        self._m = msg

    @property
    def topic(self) -> str:
        return self._m.topic()  # type: ignore[return-value]

    @property
    def partition(self) -> int:
        return self._m.partition()  # type: ignore[return-value]

    @property
    def offset(self) -> int:
        return self._m.offset()  # type: ignore[return-value]

    @property
    def timestamp(self) -> int:
        return self._m.timestamp()[1]

    @property
    def key(self) -> bytes | None:
        return self._m.key()  # type: ignore[return-value]

    @property
    def value(self) -> bytes | None:
        return self._m.value()  # type: ignore[return-value]

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]:
        return self._m.headers() or ()


def _read(cons: Consumer, render: Callable[[ConsumedRecord], bytes], out: object,
          num: int | None, partitions: set[int], exit_at_end: bool, store: bool = False) -> None:
    from confluent_kafka import KafkaError, Message

    fatal = fatal_errors()
    write = out.write  # type: ignore[attr-defined]
    flush = out.flush  # type: ignore[attr-defined]
    error_of = Message.error
    partition_of = Message.partition
    view = cast("Callable[[Message], ConsumedRecord]", MessageRecord)
    seen = 0
    at_end: set[int] = set()
    # Everything made so far (typer, click, confluent-kafka) lives as long as the command:
    # frozen, the cyclic GC no longer walks it on each collection the records trigger.
    gc.freeze()
    while num is None or seen < num:
        want = BATCH if num is None else min(BATCH, num - seen)
        messages = cons.consume(num_messages=want, timeout=0.5)
        if not messages:
            if exit_at_end and partitions and at_end >= partitions:
                return
            continue
        good = messages
        if any(map(error_of, messages)):
            # In order: an EOF after a partition's records leaves it at its end, a record
            # after its EOF means it grew again.
            good = []
            for msg in messages:
                err = msg.error()
                if err is None:
                    at_end.discard(msg.partition())
                    good.append(msg)
                    continue
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                # What came before the error is written before it is reported.
                write(b"".join(map(render, map(view, good))))
                seen += len(good)
                if store:
                    _store_last(cons, good)
                good = []
                print(f"Error: {kafka_error_text(err)}", file=sys.stderr)
                if err.fatal() or err.code() in fatal:
                    flush()
                    raise typer.Exit(1)
        elif at_end:
            # A record after EOF means the partition grew again; it is no longer at its end.
            at_end.difference_update(map(partition_of, good))
        if good:
            # One write per batch: a write per record was a fifth of the process.
            write(b"".join(map(render, map(view, good))))
            seen += len(good)
            if store:
                _store_last(cons, good)
        flush()
        if exit_at_end and partitions and at_end >= partitions:
            return


def _store_last(cons: Consumer, written: list[Message]) -> None:
    """Store the offset after the last written record of each partition (records of one
    partition come in offset order), to be committed by auto-commit."""
    last: dict[tuple[str, int], Message] = {}
    for msg in written:
        last[(msg.topic(), msg.partition())] = msg  # type: ignore[index]
    for msg in last.values():
        cons.store_offsets(msg)
