"""What every `odradek` client command shares: the bootstrap option and error reporting.

Error lines are the same everywhere: `Error: ...` on stderr, exit 1 when the cluster
refuses or cannot be reached, exit 2 for bad usage. confluent-kafka is imported only
inside the functions that need it, so `odradek --help` does not pay for it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from odradek.cli.reach import Unreachable, check_reachable

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

# odradek.client's DEFAULT_BOOTSTRAP and BOOTSTRAP_ENV, repeated here because importing
# odradek.client loads confluent-kafka, which `odradek --help` should not wait for
# (tests/unit/cli/test_constants.py checks they agree).
DEFAULT_BOOTSTRAP = "localhost:9092"
BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"

USAGE = 2  # exit code for bad usage; 1 is a refused or failed request

BootstrapOption = typer.Option(
    DEFAULT_BOOTSTRAP, "-b", "--bootstrap-server", envvar=BOOTSTRAP_ENV, metavar="HOST:PORT",
    help="A node to connect to: host:port, or a comma-separated list.")

ClientConfigOption = typer.Option(
    [], "-X", "--client-config", metavar="KEY=VALUE", show_default=False,
    help="A librdkafka setting for the underlying client (repeatable).")

CommandConfigOption = typer.Option(
    None, "--command-config", metavar="FILE", show_default=False,
    help="A properties file of Kafka client settings (security.protocol, sasl.jaas.config, "
         "ssl.truststore.location, ...), as kafka-*.sh --command-config; -X wins over it.")

TimeoutOption = typer.Option(30.0, "--timeout", metavar="SECONDS",
                             help="Seconds to wait for the cluster's answer.")

# Seconds a connection attempt to a bootstrap address may take before it counts as failed.
CONNECT_TIMEOUT = 5.0

# librdkafka's local errors (negative codes) in odradek's words; its names (_TRANSPORT...)
# and its "Local: " prefix mean nothing to a CLI user.
_LOCAL_ERRORS = {
    "_TRANSPORT": "the connection to the cluster failed (broker transport failure)",
    "_ALL_BROKERS_DOWN": "no node of the cluster can be reached",
    "_TIMED_OUT": "the cluster did not answer in time (timed out)",
    "_MSG_TIMED_OUT": "the record was not delivered in time (timed out)",
    "_RESOLVE": "a node's host name could not be resolved",
    "_UNKNOWN_TOPIC": "UNKNOWN_TOPIC_OR_PARTITION: the topic does not exist",
    "_UNKNOWN_PARTITION": "UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist",
    "_AUTHENTICATION": "SASL_AUTHENTICATION_FAILED: authentication failed",
    "_SSL": "the TLS handshake failed",
    "_INVALID_ARG": "invalid argument",
    "_UNSUPPORTED_FEATURE": "the cluster does not support this request",
}


def quiet_librdkafka(overrides: dict[str, object] | None = None) -> None:
    """librdkafka's own log lines (connection refused, retries...) are noise for a CLI user,
    who gets the outcome as one error line; `-X debug=...` brings them back."""
    from odradek.client.config import LIBRDKAFKA_LOGGER

    if overrides and "debug" in overrides:
        LIBRDKAFKA_LOGGER.setLevel(logging.DEBUG)
        if not logging.getLogger().handlers:
            logging.basicConfig(level=logging.DEBUG, format="%(message)s")
    else:
        LIBRDKAFKA_LOGGER.setLevel(logging.CRITICAL + 1)


def describe_error(exc: BaseException) -> str:
    """Kafka's error name and message where there is one, e.g. `TOPIC_ALREADY_EXISTS: ...`."""
    from confluent_kafka import KafkaError, KafkaException

    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        return kafka_error_text(err)
    return str(exc) or type(exc).__name__


def kafka_error_name(err: KafkaError) -> str:
    """Kafka's own name for a broker error (librdkafka abbreviates some, e.g.
    UNKNOWN_TOPIC_OR_PART); librdkafka's name for its local errors (negative codes)."""
    code = err.code()
    if code >= 0:
        from odradek.protocol.errors import ErrorCode

        try:
            return ErrorCode(code).name.upper()
        except ValueError:
            pass
    return str(err.name())


def _strip_local(text: str) -> str:
    return text[len("Local: "):] if text.startswith("Local: ") else text


def kafka_error_text(err: KafkaError) -> str:
    name = kafka_error_name(err)
    text = _strip_local(err.str() or "")
    if name.startswith("_"):
        # a local (client-side) error: say what happened, not librdkafka's name for it
        words = _LOCAL_ERRORS.get(name)
        if words is None:
            return text or name.lstrip("_").lower().replace("_", " ")
        detail = text.split(": ", 1)[0] if text else ""
        if detail and detail.lower() not in words.lower() and name == "_INVALID_ARG":
            return f"{words}: {text}"
        return words
    return f"{name}: {text}" if text and text not in (name, err.name()) else name


def fail(message: str, code: int = 1) -> NoReturn:
    print(f"Error: {message}", file=sys.stderr)
    raise typer.Exit(code)


def usage(message: str) -> NoReturn:
    """Bad usage: the same `Error:` line, exit code 2."""
    fail(message, code=USAGE)


def reach(bootstrap: str, overrides: dict[str, object] | None = None,
          timeout: float = CONNECT_TIMEOUT) -> None:
    """Fail fast, naming the address and the cause, when no bootstrap address answers.

    librdkafka retries an unreachable address quietly until the request times out and then
    reports `_TRANSPORT`; a plain connect first gives the user the reason within seconds.
    """
    protocol = str((overrides or {}).get("security.protocol", "plaintext")).lower()
    try:
        check_reachable(bootstrap, timeout, probe="ssl" not in protocol)
    except Unreachable as exc:
        fail(str(exc), code=USAGE if exc.bad_address else 1)


@contextmanager
def kafka_errors() -> Iterator[None]:
    """Turn an error escaping a command into one line on stderr and a non-zero exit."""
    from confluent_kafka import KafkaException

    try:
        yield
    except KafkaException as exc:
        fail(describe_error(exc))
    except ValueError as exc:
        # confluent-kafka reports bad settings and arguments as ValueError.
        usage(str(exc))


def result(future: Any, timeout: float) -> Any:
    """`.result()` of an admin future; a timeout becomes a clean error, not a traceback."""
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        fail(f"no answer from the cluster within {timeout:g}s")


def client_overrides(pairs: list[str], command_config: Path | None = None) -> dict[str, object]:
    """-X settings over a --command-config file, in librdkafka's names."""
    from odradek.client.config import parse_key_values
    from odradek.client.security_settings import for_librdkafka, read_command_config

    try:
        settings: dict[str, object] = {}
        if command_config is not None:
            settings.update(read_command_config(command_config))
        settings.update(parse_key_values(pairs, "client setting"))
        overrides = for_librdkafka(settings)
    except ValueError as exc:
        usage(str(exc))
    quiet_librdkafka(overrides)
    return overrides


def native_security(client_config: list[str] | None = None,
                    command_config: Path | None = None) -> Any:
    """The TLS/SASL of -X and --command-config for the commands that send Kafka requests
    themselves (no librdkafka): None for PLAINTEXT; settings they cannot honour are a usage
    error naming why, never dropped."""
    from odradek.client.connection import fetch_supports, security_of

    overrides = {k: str(v) for k, v in client_overrides(client_config or [],
                                                        command_config).items()}
    if not fetch_supports(overrides):
        usage("these security settings cannot be used by this command: it speaks TLS "
              "(PEM files: ssl.ca.location, ssl.certificate.location, ssl.key.location) and "
              "SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    return security_of(overrides)


def native_connection(bootstrap: str, client_id: str, timeout: float,
                      client_config: list[str] | None = None,
                      command_config: Path | None = None) -> Any:
    """A logged-in odradek native Connection to the first bootstrap address, for the commands
    that send one request themselves; refused credentials or TLS fail with the cause."""
    from odradek.client.config import resolve_bootstrap
    from odradek.client.connection import Connection, servers

    security = native_security(client_config, command_config)
    reach(bootstrap, {} if security is None else {"security.protocol": "ssl"})
    host, port = servers(resolve_bootstrap(bootstrap))[0]
    try:
        return Connection(host, port, client_id, timeout, 16 << 20, security)
    except (OSError, ConnectionError) as exc:
        fail(f"cannot connect to {host}:{port}: {exc}")
    except Exception as exc:  # a refused SASL login or TLS handshake, in the client's words
        fail(f"{host}:{port} refused the connection: {exc}")


def native_call(bootstrap: str, client_id: str, timeout: float, client_config: list[str] | None,
                command_config: Path | None, call: Callable[[Any], Any]) -> Any:
    """`call(connection)` on a native connection (native_connection) that is closed after:
    an answer whose first two items are a top-level (error code, message) fails naming the
    code when it is not 0; a lost connection fails as "no answer from BOOTSTRAP". Returns the
    answer as `call` gave it."""
    from odradek.client.connection import error_name

    conn = native_connection(bootstrap, client_id, timeout, client_config, command_config)
    try:
        answer = call(conn)
    except (OSError, ConnectionError) as exc:
        fail(f"no answer from {bootstrap}: {exc}")
    finally:
        conn.close()
    code, message = answer[0], answer[1]
    if code:
        fail(f"{error_name(code)}: {message or ''}".rstrip(": "))
    return answer


def admin(bootstrap: str, client_config: list[str] | None = None,
          command_config: Path | None = None) -> Any:
    """An AdminClient after a reachability check; librdkafka's chatter silenced."""
    overrides = client_overrides(client_config or [], command_config)
    reach(bootstrap, overrides)
    from odradek.client import admin_client

    return admin_client(bootstrap, overrides)
