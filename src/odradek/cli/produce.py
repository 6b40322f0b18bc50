"""`odradek produce TOPIC`: one record per stdin line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

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
from odradek.cli.format import FormatError, unescape

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message, Producer

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
ACKS = ("0", "1", "all", "-1")
# Delivery errors printed one by one before only the count is reported.
MAX_ERRORS_SHOWN = 10


class DeliveryTracker:
    """Counts delivery reports; remembers the first errors for the user."""

    def __init__(self, print_offsets: bool) -> None:
        self.delivered = 0
        self.failed = 0
        self.print_offsets = print_offsets

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.failed += 1
            if self.failed <= MAX_ERRORS_SHOWN:
                print(f"Error: delivery to {msg.topic()} failed: {kafka_error_text(err)}",
                      file=sys.stderr)
            return
        self.delivered += 1
        if self.print_offsets:
            print(f"{msg.topic()}/{msg.partition()}@{msg.offset()}")


def read_lines(stream: BinaryIO) -> Iterator[bytes]:
    """Lines without their terminator (\\n or \\r\\n), as kafka-console-producer reads them."""
    for line in stream:
        if line.endswith(b"\n"):
            line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        yield line


def split_key(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    """(key, value); without a separator configured the key is null."""
    if separator is None:
        return None, line
    key, sep, value = line.partition(separator)
    if not sep:
        raise ValueError("no key separator found")
    return key, value


def parse_headers(pairs: list[str]) -> list[tuple[str, bytes]]:
    headers = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"header {pair!r} is not key=value")
        headers.append((key, value.encode()))
    return headers


def produce(
    topic: str = typer.Argument(..., help="Topic to write to."),
    key_separator: str | None = typer.Option(
        None, "-k", "--key-separator", metavar="SEP",
        help="Split each line into key and value at the first SEP (escapes like \\t work)."),
    header: list[str] = typer.Option([], "-H", "--header", metavar="KEY=VALUE",
                                     help="A header on every record: key=value (repeatable)."),
    partition: int | None = typer.Option(
        None, "-p", "--partition", metavar="N",
        help="Write every record to this partition (default: by key, as the Java client "
             "does; records without a key are spread)."),
    compression: str = typer.Option("none", "-z", "--compression", metavar="CODEC",
                                     help="none, gzip, snappy, lz4 or zstd."),
    acks: str = typer.Option("all", "--acks", metavar="ACKS", help="0, 1 or all (-1)."),
    print_offsets: bool = typer.Option(False, "--print-offsets",
                                       help="Print topic/partition@offset per delivered record."),
    timeout: float = typer.Option(60.0, "--timeout", metavar="SECONDS",
                                  help="Seconds to wait for outstanding deliveries at the end."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Produce one record per line of stdin; exits non-zero if any record is not delivered."""
    from odradek.client import producer as make_producer

    if compression not in COMPRESSIONS:
        usage(f"--compression must be one of {', '.join(COMPRESSIONS)}")
    if acks not in ACKS:
        usage(f"--acks must be one of {', '.join(ACKS)}")
    if partition is not None and partition < 0:
        usage(f"--partition must not be negative, not {partition}")
    try:
        separator = unescape(key_separator).encode("utf-8", "surrogateescape") \
            if key_separator is not None else None
        headers = parse_headers(header)
    except (ValueError, FormatError) as exc:
        usage(str(exc))
    if separator == b"":
        usage("--key-separator must not be empty")
    reach(bootstrap, client_overrides(client_config, command_config))
    tracker = DeliveryTracker(print_offsets)
    with kafka_errors():
        # murmur2_random places keys where the Java client (and kafka-console-producer) would.
        prod = make_producer(bootstrap, client_overrides(client_config, command_config), acks=acks,
                             compression_type=compression, partitioner="murmur2_random",
                             linger_ms=5)
        sent, bad_line = _send_lines(prod, topic, read_lines(sys.stdin.buffer), separator,
                                     headers, partition, tracker)
        remaining = prod.flush(timeout)
    if bad_line is not None:
        fail(f"line {bad_line}: no key separator {key_separator!r} found; "
             f"{tracker.delivered} records before it were delivered")
    if remaining:
        fail(f"{remaining} of {sent} records were not delivered within {timeout:g}s")
    if tracker.failed:
        fail(f"{tracker.failed} of {sent} records failed")


def _send_lines(prod: Producer, topic: str, lines: Iterator[bytes], separator: bytes | None,
                headers: list[tuple[str, bytes]], partition: int | None,
                tracker: DeliveryTracker) -> tuple[int, int | None]:
    """Send every line; returns (records sent, number of the first line without a separator)."""
    extra = {"partition": partition} if partition is not None else {}
    sent = 0
    for number, line in enumerate(lines, 1):
        try:
            key, value = split_key(line, separator)
        except ValueError:
            return sent, number
        while True:
            try:
                prod.produce(topic, value, key, headers=headers or None,
                             on_delivery=tracker, **extra)
                break
            except BufferError:
                # The local queue is full: let deliveries drain, then try again.
                prod.poll(0.1)
        sent += 1
        prod.poll(0)
    return sent, None
