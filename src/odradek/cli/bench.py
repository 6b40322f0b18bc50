"""`odradek bench produce|consume|e2e`: the perf tools Kafka users know, against any node.

produce prints what kafka-producer-perf-test prints, consume what kafka-consumer-perf-test
prints, e2e what Kafka's EndToEndLatency tool prints (at a chosen rate instead of one record
at a time). The measuring itself lives in the `odradek.perf` package.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    client_overrides,
    describe_error,
    fail,
    kafka_errors,
    reach,
)
from odradek.client.consumer_settings import LIBRDKAFKA_DEFAULTS, settings_text

# odradek.perf.results' client names and default batch, repeated so that `--help` does not
# load the perf tools (numpy, multiprocessing); tests/unit/cli/test_constants.py checks them.
CONFLUENT = "confluent-kafka"
COLUMNAR = "columnar"
CLIENTS = (CONFLUENT, COLUMNAR)
DEFAULT_BATCH = 10_000

app = typer.Typer(help="Measure a node: producer, consumer and end-to-end latency perf tests.",
                  no_args_is_help=True, add_completion=False)

TopicOption = typer.Option("perf", "--topic", "-t", metavar="TOPIC", help="The topic to use.")
PartitionsOption = typer.Option(
    6, "--partitions", "-p", min=1, metavar="N", help="Create the topic with this many partitions when it is missing.")


def ensure_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0,
                 settings: dict[str, object] | None = None) -> None:
    """odradek.client.admin.ensure_topic, with the CLI's reachability check and error exit."""
    from confluent_kafka import KafkaException

    from odradek.client.admin import ensure_topic as create_missing

    # only the connection's settings: -X also carries the perf tools' own knobs
    secure = {k: v for k, v in (settings or {}).items()
              if k.startswith(("security.", "ssl.", "sasl."))}
    reach(bootstrap, secure)
    try:
        create_missing(bootstrap, topic, partitions, timeout, secure)
    except KafkaException as exc:
        fail(describe_error(exc))


def _strings(overrides: dict[str, object]) -> dict[str, str]:
    return {key: str(value) for key, value in overrides.items()}


@app.command()
def produce(
    topic: str = TopicOption,
    num_records: int = typer.Option(1_000_000, "--num-records", "-n", min=1, metavar="N",
                                    help="How many records to produce."),
    record_size: int = typer.Option(100, "--record-size", "-s", min=1, metavar="BYTES",
                                    help="The size of each record's value."),
    throughput: float = typer.Option(
        -1, "--throughput", metavar="RECORDS/S",
        help="At most this many records/s; -1 for no limit."),
    acks: str = typer.Option("1", "--acks", metavar="ACKS", help="0, 1 or all (-1)."),
    partitions: int = PartitionsOption,
    processes: int = typer.Option(
        1, "--processes", min=1, metavar="N",
        help="Producer processes, each with its own client, sharing the records and the rate."),
    client: str = typer.Option(
        CONFLUENT, "--client", metavar="CLIENT",
        help="confluent-kafka, or columnar: odradek's own Produce client building record "
             "batches from numpy columns (PLAINTEXT, SSL or SASL PLAIN/SCRAM; needs numpy; "
             "-X batch.num.messages, batch.size, max.in.flight, batches.per.request, compression.type, "
             "enable.idempotence (needs --acks all), delivery.timeout.ms)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Produce records as fast as the client goes (kafka-producer-perf-test)."""
    from odradek.perf import runs

    overrides = client_overrides(client_config, command_config)
    if client not in CLIENTS:
        fail(f"--client must be one of {', '.join(CLIENTS)}, not {client!r}")
    with kafka_errors():
        ensure_topic(bootstrap, topic, partitions, settings=overrides)
        try:
            if client == COLUMNAR:
                result = runs.run_producer_columnar(bootstrap, topic, num_records, record_size,
                                                    acks, _strings(overrides),
                                                    throughput=throughput, processes=processes)
            else:
                result = runs.run_producer(bootstrap, topic, num_records, record_size, acks,
                                           _strings(overrides), throughput=throughput,
                                           processes=processes)
        except (RuntimeError, ValueError) as exc:
            fail(str(exc))
    if result.errors:
        raise typer.Exit(1)


@app.command()
def consume(
    topic: str = TopicOption,
    messages: int = typer.Option(1_000_000, "--messages", "-n", min=1, metavar="N",
                                 help="Stop after this many records."),
    timeout: float = typer.Option(10.0, "--timeout", metavar="SECONDS",
                                  help="Stop after this many seconds without a record."),
    processes: int = typer.Option(
        1, "--processes", min=1, metavar="N",
        help="Consumer processes, each with its own client, splitting the partitions."),
    batch: int = typer.Option(
        DEFAULT_BATCH, "--batch", min=1, metavar="N",
        help="Records asked for per consume(num_messages=...) call (confluent-kafka only)."),
    client: str = typer.Option(
        CONFLUENT, "--client", metavar="CLIENT",
        help="confluent-kafka, or columnar: odradek's own Fetch client decoding record "
             "batches into numpy columns (PLAINTEXT, SSL or SASL PLAIN/SCRAM; needs numpy)."),
    librdkafka_defaults: bool = typer.Option(
        False, "--librdkafka-defaults",
        help="confluent-kafka only: use librdkafka's own defaults ("
             + settings_text(LIBRDKAFKA_DEFAULTS)
             + ") instead of the shipped settings, to show the difference; -X still wins."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Read a topic from the beginning as fast as the client goes (kafka-consumer-perf-test)."""
    from odradek.perf import runs

    overrides = client_overrides(client_config, command_config)
    if librdkafka_defaults:
        overrides = {**LIBRDKAFKA_DEFAULTS, **overrides}
    if client not in CLIENTS:
        fail(f"--client must be one of {', '.join(CLIENTS)}, not {client!r}")
    reach(bootstrap, overrides)
    with kafka_errors():
        try:
            result = runs.run_consumer(bootstrap, topic, messages, timeout, _strings(overrides),
                                       processes=processes, batch=batch, client=client)
        except RuntimeError as exc:
            fail(str(exc))
    if result.records < messages or result.errors:
        raise typer.Exit(1)


consume.__doc__ = (
    "Read a topic from the beginning as fast as the client goes (kafka-consumer-perf-test). "
    "confluent-kafka consumers get odradek's shipped fetch settings: "
    + settings_text() + " (-X key=value overrides any of them).")


@app.command()
def e2e(
    topic: str = typer.Option("", "--topic", "-t", metavar="TOPIC", show_default=False,
                              help="A topic to use (default: a fresh one per run)."),
    rate: float = typer.Option(10_000, "--rate", metavar="RECORDS/S", help="Records/s to produce; 0 for the maximum."),
    seconds: float = typer.Option(5.0, "--seconds", metavar="SECONDS", help="How long to measure."),
    record_size: int = typer.Option(100, "--record-size", "-s", min=9, metavar="BYTES",
                                    help="The size of each record's value (at least 9)."),
    acks: str = typer.Option("1", "--acks", metavar="ACKS", help="0, 1 or all (-1)."),
    partitions: int = PartitionsOption,
    client: str = typer.Option(
        CONFLUENT, "--client", metavar="CLIENT",
        help="confluent-kafka, or columnar: odradek's own Produce and Fetch clients (PLAINTEXT "
             "only, needs numpy); records are stamped with their scheduled send time, so the "
             "wait for a batch counts (-X pace.tick.ms: shortest producer sleep, "
             "-X fetch.wait.max.ms: the consumer's long poll)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """End-to-end latency, produce call to consumer, at a fixed rate (EndToEndLatency)."""
    from odradek.perf import confluent

    overrides = client_overrides(client_config, command_config)
    if client not in CLIENTS:
        fail(f"--client must be one of {', '.join(CLIENTS)}, not {client!r}")
    # Only this run's records may be measured: a fresh topic unless the user names one.
    name = topic or f"odradek-e2e-{int(time.time() * 1000)}"
    with kafka_errors():
        ensure_topic(bootstrap, name, partitions, settings=overrides)
        if client == COLUMNAR:
            from odradek.perf import e2e_columnar

            extra = _strings(overrides)
            try:
                tick_s = float(extra.pop("pace.tick.ms", e2e_columnar.DEFAULT_TICK_S * 1000)) / 1000
                wait_ms = int(extra.pop("fetch.wait.max.ms", e2e_columnar.DEFAULT_FETCH_WAIT_MS))
                result = e2e_columnar.run_e2e_columnar(bootstrap, name, rate, seconds,
                                                       record_size, acks, extra,
                                                       tick_s=tick_s, max_wait_ms=wait_ms)
            except (RuntimeError, ValueError) as exc:
                fail(str(exc))
        else:
            result = confluent.run_e2e(bootstrap, name, rate, seconds, record_size, acks,
                                       producer_extra=_strings(overrides))
    if not result.records:
        raise typer.Exit(1)
