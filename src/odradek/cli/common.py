"""What every `odradek` client command shares: the bootstrap option and error reporting."""

from __future__ import annotations

import concurrent.futures
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from confluent_kafka import KafkaError, KafkaException

from odradek.client import BOOTSTRAP_ENV, DEFAULT_BOOTSTRAP, parse_key_values
from odradek.client.config import LIBRDKAFKA_LOGGER
from odradek.protocol.errors import ErrorCode

BootstrapOption = typer.Option(
    DEFAULT_BOOTSTRAP, "-b", "--bootstrap-server", envvar=BOOTSTRAP_ENV,
    help="host:port of a node (or a comma-separated list).")

ClientConfigOption = typer.Option(
    [], "-X", "--client-config",
    help="A librdkafka setting for the underlying client: key=value (repeatable).")

TimeoutOption = typer.Option(30.0, "--timeout", help="Seconds to wait for the cluster.")


def quiet_librdkafka(overrides: dict[str, object] | None = None) -> None:
    """librdkafka's own log lines (connection refused, retries...) are noise for a CLI user,
    who gets the outcome as one error line; `-X debug=...` brings them back."""
    if overrides and "debug" in overrides:
        LIBRDKAFKA_LOGGER.setLevel(logging.DEBUG)
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.DEBUG, format="%(message)s")
    else:
        LIBRDKAFKA_LOGGER.setLevel(logging.CRITICAL + 1)


def describe_error(exc: BaseException) -> str:
    """Kafka's error name and message where there is one, e.g. `TOPIC_ALREADY_EXISTS: ...`."""
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        return kafka_error_text(err)
    return str(exc) or type(exc).__name__


def kafka_error_name(err: KafkaError) -> str:
    """Kafka's own name for a broker error (librdkafka abbreviates some, e.g.
    UNKNOWN_TOPIC_OR_PART); librdkafka's name for its local errors (negative codes)."""
    code = err.code()
    if code >= 0:
        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            pass
    return err.name()


def kafka_error_text(err: KafkaError) -> str:
    name = kafka_error_name(err)
    text = err.str()
    return f"{name}: {text}" if text and text not in (name, err.name()) else name


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"Error: {message}", file=sys.stderr)
    raise typer.Exit(code)


@contextmanager
def kafka_errors() -> Iterator[None]:
    """Turn an error escaping a command into one line on stderr and a non-zero exit."""
    try:
        yield
    except KafkaException as exc:
        fail(describe_error(exc))
    except ValueError as exc:
        # confluent-kafka reports bad settings and arguments as ValueError.
        fail(str(exc), code=2)


def result(future: Any, timeout: float) -> Any:
    """`.result()` of an admin future; a timeout becomes a clean error, not a traceback."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        fail(f"no answer from the cluster within {timeout:g}s")


def client_overrides(pairs: list[str]) -> dict[str, object]:
    try:
        overrides: dict[str, object] = dict(parse_key_values(pairs, "client setting"))
    except ValueError as exc:
        fail(str(exc), code=2)
    quiet_librdkafka(overrides)
    return overrides
