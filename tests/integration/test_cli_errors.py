"""Issue 12, point 3: what a user sees when the CLI cannot do what was asked.

Every command run here is the real `odradek` command in a subprocess, against a real node
or against an address where no node is.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tests.integration.cli_support import odradek, ok
from tests.integration.group_support import new_topic, produce
from tests.support.broker import BrokerProcess

# librdkafka's own words, which must never reach the user
INTERNAL = ("_TRANSPORT", "Local:", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "Traceback", "rd_kafka")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_error_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("Error: "), stderr
    assert not any(word in stderr for word in INTERNAL), stderr
    return lines[0]


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A port that accepts connections and never answers (a wrong service, a hung node)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    port = int(server.getsockname()[1])
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield port
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


CLIENT_COMMANDS = [
    ("topic", "list"),
    ("topic", "describe", "t"),
    ("topic", "create", "t"),
    ("group", "list"),
    ("group", "describe", "g"),
    ("consume", "t", "-n", "1"),
    ("transaction", "list"),
]


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_refused_address_is_named_with_its_cause(command: tuple[str, ...]) -> None:
    address = f"127.0.0.1:{_free_port()}"
    res = odradek(*command, bootstrap=address, timeout=60)
    assert res.returncode == 1
    assert _one_error_line(res.stderr) == f"Error: cannot reach {address}: connection refused"


def test_produce_to_refused_address() -> None:
    address = f"127.0.0.1:{_free_port()}"
    res = odradek("produce", "t", bootstrap=address, input="a\n", timeout=60)
    assert res.returncode == 1
    assert _one_error_line(res.stderr) == f"Error: cannot reach {address}: connection refused"


def test_unresolvable_name_is_named() -> None:
    res = odradek("topic", "list", bootstrap="no-such-host.invalid:9092", timeout=60)
    assert res.returncode == 1
    assert _one_error_line(res.stderr) == \
        "Error: cannot reach no-such-host.invalid:9092: host name not resolved"


def test_listener_that_never_answers_is_named(silent_listener: int) -> None:
    address = f"127.0.0.1:{silent_listener}"
    res = odradek("group", "list", bootstrap=address, timeout=60)
    assert res.returncode == 1
    assert _one_error_line(res.stderr) == \
        f"Error: cannot reach {address}: connected, but no Kafka answer within 5s"


def test_every_address_of_a_list_is_named() -> None:
    a, b = f"127.0.0.1:{_free_port()}", "no-such-host.invalid:9092"
    res = odradek("topic", "list", bootstrap=f"{a},{b}", timeout=60)
    assert res.returncode == 1
    assert _one_error_line(res.stderr) == (
        f"Error: cannot reach any bootstrap address: {a} (connection refused), "
        f"{b} (host name not resolved)")


def test_one_reachable_address_of_a_list_is_enough(shared_broker: BrokerProcess) -> None:
    dead = f"127.0.0.1:{_free_port()}"
    out = ok("topic", "list", bootstrap=f"{dead},{shared_broker.bootstrap}")
    assert out.splitlines()[0].split() == ["NAME", "PARTITIONS", "REPLICAS"]


@pytest.mark.parametrize("args,message", [
    (("topic", "create", "t", "-p", "-3"), "Error: --partitions must be at least 1, not -3"),
    (("topic", "create", "t", "-p", "0"), "Error: --partitions must be at least 1, not 0"),
    (("topic", "create", "t", "-r", "0"),
     "Error: --replication-factor must be at least 1, not 0"),
    (("topic", "add-partitions", "t", "-p", "-1"),
     "Error: --partitions must be at least 1, not -1"),
    (("produce", "t", "-p", "-2"), "Error: --partition must not be negative, not -2"),
    (("consume", "t", "-p", "-2"), "Error: --partition must not be negative, not -2"),
    (("topic", "list", "--format", "yaml"), "Error: --format must be text or json, not 'yaml'"),
    (("group", "reset-offsets", "g", "--all-topics"),
     "Error: give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
     "--to-datetime, --by-duration, --from-file"),
])
def test_bad_usage_is_one_line_and_exit_2(shared_broker: BrokerProcess, args: tuple[str, ...],
                                          message: str) -> None:
    res = odradek(*args, bootstrap=shared_broker.bootstrap, input="")
    assert res.returncode == 2, res.stderr
    assert _one_error_line(res.stderr) == message


def test_config_list_needs_broker_or_topic() -> None:
    res = odradek("config", "list")
    assert res.returncode == 2
    assert _one_error_line(res.stderr) == "Error: give exactly one of --broker or --topic"


def test_malformed_bootstrap_address_is_bad_usage() -> None:
    res = odradek("topic", "list", bootstrap="localhost")
    assert res.returncode == 2
    assert _one_error_line(res.stderr) == \
        "Error: bad bootstrap address 'localhost': use host:port, e.g. localhost:9092"


def test_unknown_option_is_bad_usage_with_an_error_line() -> None:
    res = odradek("topic", "list", "--no-such-option")
    assert res.returncode == 2
    assert "Error: No such option: --no-such-option" in res.stderr
    assert "Traceback" not in res.stderr


def test_refused_requests_exit_1_in_kafka_words(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    ok("topic", "create", "err-dup", "-p", "1", bootstrap=b)
    dup = odradek("topic", "create", "err-dup", bootstrap=b)
    assert dup.returncode == 1
    assert _one_error_line(dup.stderr).startswith("Error: TOPIC_ALREADY_EXISTS")
    missing = odradek("topic", "describe", "err-nope", bootstrap=b)
    assert missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_error_line(missing.stderr)
    consume_missing = odradek("consume", "err-nope", "-n", "1", bootstrap=b)
    assert consume_missing.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in _one_error_line(consume_missing.stderr)


def test_missing_group_fails_alike_in_describe_reset_and_delete(
        shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    topic = new_topic(b, "err-groups", partitions=1)
    produce(b, topic, 5)
    expected = "Error: Consumer group 'err-no-group' does not exist."
    for args in (("group", "describe", "err-no-group"),
                 ("group", "describe", "err-no-group", "--state"),
                 ("group", "describe", "err-no-group", "--members"),
                 ("group", "reset-offsets", "err-no-group", "--topic", topic, "--to-earliest"),
                 ("group", "reset-offsets", "err-no-group", "--all-topics", "--to-latest",
                  "--execute"),
                 ("group", "delete", "err-no-group")):
        res = odradek(*args, bootstrap=b)
        assert res.returncode == 1, (args, res.stdout, res.stderr)
        assert _one_error_line(res.stderr) == expected, args
        assert res.stdout == "", args  # no empty plan
