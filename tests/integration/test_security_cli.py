"""Issue 16: the CLI against a SASL_SSL listener: `odradek user create|list|delete` (SCRAM
credentials through the metadata log), and client security settings for commands given as
a Kafka client properties file (--command-config) or -X pairs. The node also runs its
Schema Registry and console, which log in over SASL_SSL with the node's
schema.registry.kafkastore.* and console.kafka.* settings."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.security_support import USERS, SecuredNode, start_secured
from tests.support.broker import ODRADEK, free_port

REGISTRY_PORT, CONSOLE_PORT = free_port(), free_port()


def _jaas(module: str, user: str) -> str:
    return (f"org.apache.kafka.common.security.{module} required "
            f'username="{user}" password="{USERS[user]}";')


def _services(ca_pem: Path) -> dict[str, str]:
    """The registry logs in as admin with SCRAM-SHA-512 (Confluent's kafkastore.* names), the
    console as alice with PLAIN: both over the SASL_SSL listener, as Java clients say it."""
    return {
        "schema.registry.listeners": f"http://127.0.0.1:{REGISTRY_PORT}",
        "schema.registry.kafkastore.security.protocol": "SASL_SSL",
        "schema.registry.kafkastore.sasl.mechanism": "SCRAM-SHA-512",
        "schema.registry.kafkastore.sasl.jaas.config": _jaas("scram.ScramLoginModule", "admin"),
        "schema.registry.kafkastore.ssl.truststore.type": "PEM",
        "schema.registry.kafkastore.ssl.truststore.location": str(ca_pem),
        "console.listeners": f"http://127.0.0.1:{CONSOLE_PORT}",
        "console.kafka.security.protocol": "SASL_SSL",
        "console.kafka.sasl.mechanism": "PLAIN",
        "console.kafka.sasl.jaas.config": _jaas("plain.PlainLoginModule", "alice"),
        "console.kafka.ssl.ca.location": str(ca_pem),
    }


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNode]:
    tmp = tmp_path_factory.mktemp("seccli")
    s = start_secured(tmp, _services(tmp / "ca" / "ca.pem"))  # where start_secured's CA goes
    yield s
    assert s.node.stop() == 0, s.node.log()


@pytest.fixture(scope="module")
def admin_config(secured: SecuredNode, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a Kafka user hands kafka-topics.sh: Java names, a JAAS line, a PEM trust store."""
    path = tmp_path_factory.mktemp("cfg") / "admin.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f"    username=\"admin\" password=\"{USERS['admin']}\";\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={secured.ca.ca_pem}\n")
    return path


def odradek(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ODRADEK, *args], capture_output=True, text=True, timeout=timeout)


def _authenticates(secured: SecuredNode, mechanism: str, user: str, password: str) -> bool:
    errors: list[str] = []
    producer = Producer({**secured.sasl_ssl(mechanism, user, password),
                         "error_cb": lambda e: errors.append(e.name()),
                         "message.timeout.ms": 20000})
    producer.produce("auth-probe", b"x")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if producer.flush(0.5) == 0:
            return True
        if "_AUTHENTICATION" in errors:
            producer.purge()
            return False
    pytest.fail(f"neither delivered nor refused: {errors}")


def test_user_lifecycle(secured: SecuredNode, admin_config: Path) -> None:
    b = ["-b", secured.addr("SASL_SSL"), "--command-config", str(admin_config)]
    listed = odradek("user", "list", *b)
    assert listed.returncode == 0, listed.stderr
    assert "admin" in listed.stdout and "alice" in listed.stdout
    assert "SCRAM-SHA-512 (iterations=4096)" in listed.stdout
    made = odradek("user", "create", "bob", "-m", "SCRAM-SHA-256", "--password", "bob-pw",
                   "--iterations", "8192", *b)
    assert made.returncode == 0, made.stderr
    assert "bob" in odradek("user", "list", "bob", *b).stdout
    # the new credential replicates through the metadata log to the SASL listeners
    deadline = time.monotonic() + 30
    while not _authenticates(secured, "SCRAM-SHA-256", "bob", "bob-pw"):
        if time.monotonic() > deadline:
            pytest.fail("bob never authenticated")
    assert _authenticates(secured, "PLAIN", "bob", "bob-pw")
    assert not _authenticates(secured, "SCRAM-SHA-256", "bob", "not-bobs")
    assert not _authenticates(secured, "SCRAM-SHA-512", "bob", "bob-pw")  # no 512 credential
    gone = odradek("user", "delete", "bob", *b)
    assert gone.returncode == 0, gone.stderr
    assert not _authenticates(secured, "SCRAM-SHA-256", "bob", "bob-pw")
    missing = odradek("user", "delete", "bob", *b)
    assert missing.returncode != 0 and "bob" in missing.stderr
    for out in (listed, made, gone):
        assert "bob-pw" not in out.stdout + out.stderr
    assert "bob-pw" not in secured.node.log()


def test_user_create_refuses_bad_iterations(secured: SecuredNode, admin_config: Path) -> None:
    out = odradek("user", "create", "carol", "--password", "pw", "--iterations", "100",
                  "-b", secured.addr("SASL_SSL"), "--command-config", str(admin_config))
    assert out.returncode != 0
    assert "iterations" in out.stderr.lower()


def test_topic_and_records_over_sasl_ssl(secured: SecuredNode, admin_config: Path) -> None:
    b = ["-b", secured.addr("SASL_SSL"), "--command-config", str(admin_config)]
    made = odradek("topic", "create", "cli-secure", "-p", "2", *b)
    assert made.returncode == 0, made.stderr
    produced = subprocess.run([*ODRADEK, "produce", "cli-secure", *b], input="one\ntwo\n",
                              capture_output=True, text=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = odradek("consume", "cli-secure", "--from-beginning", "-e", "-f", "%v\\n", *b)
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == ["one", "two"]
    # the same with -X pairs (librdkafka's names)
    x = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={secured.ca.ca_pem}",
         "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice",
         "-X", f"sasl.password={USERS['alice']}"]
    listed = odradek("topic", "list", "-b", secured.addr("SASL_SSL"), *x)
    assert listed.returncode == 0, listed.stderr
    assert "cli-secure" in listed.stdout


def test_command_config_refuses_what_it_cannot_honour(secured: SecuredNode,
                                                       tmp_path: Path) -> None:
    cfg = tmp_path / "jks.properties"
    cfg.write_text("security.protocol=SSL\nssl.truststore.location=/x/truststore.jks\n")
    out = odradek("topic", "list", "-b", secured.addr("MTLS"), "--command-config", str(cfg))
    assert out.returncode == 2
    assert "ssl.truststore.location" in out.stderr


def test_remaining_commands_take_command_config(secured: SecuredNode, admin_config: Path,
                                                tmp_path: Path) -> None:
    """cluster, partitions, transaction, group and bench over SASL_SSL with the same file:
    the first three send their requests themselves (network.Channel with TLS and SCRAM),
    group and bench through librdkafka."""
    import json

    b = ["-b", secured.addr("SASL_SSL"), "--command-config", str(admin_config)]
    described = odradek("cluster", "describe", "--format", "json", *b)
    assert described.returncode == 0, described.stderr
    state = json.loads(described.stdout)
    assert [br["id"] for br in state["brokers"]] == [1] and state["quorum"]["leader_id"] == 1
    listed = odradek("transaction", "list", *b)
    assert listed.returncode == 0, listed.stderr
    absent = odradek("transaction", "describe", "no-such-txn", *b)
    assert "TRANSACTIONAL_ID_NOT_FOUND" in absent.stderr, absent.stderr
    made = odradek("topic", "create", "cli-elect", "-p", "1", *b)
    assert made.returncode == 0, made.stderr
    elected = odradek("partitions", "elect-leaders", "--topic", "cli-elect", "--partition", "0",
                      *b)
    assert elected.returncode == 0, elected.stderr  # kafka-leader-election's answer:
    assert "Valid replica already elected for partitions cli-elect-0" in elected.stdout
    benched = odradek("bench", "produce", "-t", "cli-bench", "-n", "2000", "-p", "1",
                      "--client", "columnar", *b, timeout=120)
    assert benched.returncode == 0, benched.stderr
    groups = odradek("group", "list", *b)
    assert groups.returncode == 0, groups.stderr
    # without the file the same commands reach a SASL_SSL port in plaintext: refused
    plain = odradek("cluster", "describe", "-b", secured.addr("SASL_SSL"), timeout=60)
    assert plain.returncode != 0
    # what the native connection cannot honour is a usage error, not a weaker connection
    cfg = tmp_path / "oauth.properties"
    cfg.write_text("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n")
    refused = odradek("cluster", "describe", "-b", secured.addr("SASL_SSL"),
                      "--command-config", str(cfg))
    assert refused.returncode == 2 and "cannot be used by this command" in refused.stderr


def _http(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _wait_http(url: str, secured: SecuredNode) -> Any:
    deadline = time.monotonic() + 120
    while True:
        try:
            return _http(url)
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() > deadline:
                pytest.fail(f"{url} never answered ({exc}):\n{secured.node.log()}")
            time.sleep(0.5)


def test_node_services_log_in_with_their_settings(secured: SecuredNode) -> None:
    """The registry keeps _schemas over SASL_SSL as admin; the console lists topics as
    alice. Both connect to the SASL_SSL listener, not the PLAINTEXT one the node also has."""
    registry = f"http://127.0.0.1:{REGISTRY_PORT}"
    _wait_http(f"{registry}/subjects", secured)
    made = _http(f"{registry}/subjects/sec-value/versions", {"schema": '"string"'})
    assert _http(f"{registry}/schemas/ids/{made['id']}")["schema"] == '"string"'
    assert "sec-value" in _http(f"{registry}/subjects")
    console = f"http://127.0.0.1:{CONSOLE_PORT}"
    topics = _wait_http(f"{console}/api/topics?internal=true", secured)
    assert "_schemas" in json.dumps(topics), topics
    # its security pages ask natively over the same login: the users, and Kafka's
    # SECURITY_DISABLED for ACLs on a node without an authorizer (not an empty list)
    assert {u["user"] for u in _http(f"{console}/api/users")["users"]} >= {"admin", "alice"}
    with pytest.raises(urllib.error.HTTPError) as refused:
        _http(f"{console}/api/acls")
    assert "SECURITY_DISABLED" in refused.value.read().decode()
    log = secured.node.log()
    sasl = re.escape(secured.addr("SASL_SSL"))
    assert re.search(rf"the Schema Registry on \S+ \(pid \d+\) over {sasl}$", log, re.M), log
    assert re.search(rf"the console on \S+ \(pid \d+\) over {sasl}$", log, re.M), log
    assert USERS["admin"] not in log and USERS["alice"] not in log  # never logged


def test_registry_serve_with_refused_credentials_says_so(secured: SecuredNode) -> None:
    """`odradek registry serve -X ...`: a wrong password ends it at once with librdkafka's
    authentication error, not a silent wait or a timeout."""
    x = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={secured.ca.ca_pem}",
         "-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=admin",
         "-X", "sasl.password=wrong"]
    out = odradek("registry", "serve", "-b", secured.addr("SASL_SSL"), "--listeners",
                  f"http://127.0.0.1:{free_port()}", *x, timeout=120)
    assert out.returncode == 1, out.stderr
    assert "refused the registry's connection" in out.stderr, out.stderr
    assert "Authentication failed" in out.stderr or "authentication" in out.stderr.lower()
