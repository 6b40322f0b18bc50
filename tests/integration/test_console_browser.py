"""Issue 18, point 4: the web console, driven in a real browser (Playwright from PyPI with
Debian's chromium, launched from its path) against one `odradek serve` node that runs the
console (console.listeners) and the Schema Registry beside it.

One node, one console and one browser for the module (suite time); each test has its own
topics and groups. Screenshots go under the module's temp dir, so a failure can be looked at.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support.broker import ODRADEK, BrokerProcess, free_port

CHROMIUM = "/usr/bin/chromium"  # Debian's package (Makefile DEB_PACKAGES)
WAIT_MS = 60_000
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
expect.set_options(timeout=WAIT_MS)  # a loaded machine: wait for conditions, generously


def _get(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def wait_until(cond: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


class Env:
    def __init__(self, node: BrokerProcess, console: str, registry: str, shots: Path,
                 sasl_port: int) -> None:
        self.node, self.console, self.registry, self.shots = node, console, registry, shots
        self.sasl = f"127.0.0.1:{sasl_port}"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    base = tmp_path_factory.mktemp("console")
    console = f"http://127.0.0.1:{free_port()}"
    registry = f"http://127.0.0.1:{free_port()}"
    node = BrokerProcess(base / "data", settings={"console.listeners": console,
                                                   "schema.registry.listeners": registry})
    # an authorizer, with the PLAINTEXT listener's User:ANONYMOUS (the node's own console and
    # registry) a super user, and SASL_PLAINTEXT for a console that logs in as someone else
    sasl_port = free_port()
    node.settings.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": AUTHORIZER,
        "super.users": "User:ANONYMOUS"})
    node.start(timeout=120)
    try:
        wait_until(lambda: _get(console + "/api/info")[0] == 200, "the console")
        wait_until(lambda: _get(registry + "/subjects")[0] == 200, "the registry")
        yield Env(node, console, registry, base / "screenshots", sasl_port)
    finally:
        node.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser, env: Env, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    pg.set_default_timeout(WAIT_MS)
    try:
        yield pg
    finally:
        env.shots.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(env.shots / f"{request.node.name}.png"), full_page=True)
        context.close()


def produce(bootstrap: str, topic: str, values: list[bytes], key: bytes | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        p.produce(topic, value=v, key=key, partition=0)
    assert p.flush(30) == 0


def create_topic(env: Env, name: str, partitions: int = 1) -> None:
    req = urllib.request.Request(env.console + "/api/topics", method="POST",
                                 data=json.dumps({"name": name, "partitions": partitions}).encode())
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 201


def notice(page: Page, kind: str, text: str) -> None:
    box = page.locator("#notice")
    expect(box).to_have_attribute("data-kind", kind)
    expect(box).to_contain_text(text)


def test_every_page_opens(page: Page, env: Env) -> None:
    page.goto(env.console + "/")
    expect(page.get_by_test_id("brokers").locator("tbody tr")).to_have_count(1)
    expect(page.get_by_test_id("card-controller")).to_contain_text("1")
    expect(page.get_by_test_id("quorum")).to_be_visible()  # from the node's admin HTTP
    # the numbers update live: a topic made elsewhere shows without a reload
    before = int(page.get_by_test_id("card-topics").locator(".n").inner_text().replace(",", ""))
    create_topic(env, "console-live", 4)
    expect(page.get_by_test_id("card-topics").locator(".n")).to_have_text(str(before + 1))
    for nav, testid in (("Topics", "topics-table"), ("Consumer groups", "groups-table"),
                        ("Schemas", "subjects-table")):
        page.get_by_role("link", name=nav, exact=True).click()
        expect(page.get_by_test_id(testid)).to_be_visible()
    page.get_by_role("link", name="Messages", exact=True).click()
    expect(page.get_by_test_id("msg-browse")).to_be_visible()
    # an unknown page is said so, not blank
    page.goto(env.console + "/nowhere")
    assert _get(env.console + "/nowhere")[0] == 404


def test_create_topic_and_refuse_a_bad_name(page: Page, env: Env) -> None:
    page.goto(env.console + "/topics")
    page.get_by_test_id("new-topic-name").fill("console-created")
    page.locator("form[data-testid=create-topic] input[name=partitions]").fill("3")
    page.get_by_role("button", name="Create").click()
    notice(page, "ok", "Created topic console-created with 3 partition(s)")
    page.get_by_test_id("topic-search").fill("console-created")
    row = page.get_by_test_id("topics-table").locator("tbody tr")
    expect(row).to_have_count(1)
    row.get_by_role("link", name="console-created").click()
    expect(page.get_by_test_id("partitions-table").locator("tbody tr")).to_have_count(3)
    expect(page.get_by_test_id("configs-table")).to_contain_text("cleanup.policy")
    # alter a config: the page shows the new value and its source
    form = page.get_by_test_id("alter-config")
    form.locator("input[name=key]").fill("retention.ms")
    form.locator("input[name=value]").fill("3600000")
    form.get_by_role("button", name="Apply").click()
    notice(page, "ok", "retention.ms set to 3600000")
    row = page.get_by_test_id("configs-table").get_by_role("row", name=re.compile(r"^retention\.ms "))
    expect(row).to_contain_text("3600000")
    expect(row).to_contain_text("DYNAMIC_TOPIC_CONFIG")
    # a bad name is refused with the broker's reason
    page.goto(env.console + "/topics")
    page.get_by_test_id("new-topic-name").fill("bad name!")
    page.get_by_role("button", name="Create").click()
    notice(page, "error", "illegal")


def test_produce_browse_and_search(page: Page, env: Env) -> None:
    create_topic(env, "console-msgs", 2)
    produce(env.node.bootstrap, "console-msgs", [f"filler-{i}".encode() for i in range(300)])
    page.goto(env.console + "/messages?topic=console-msgs")
    form = page.get_by_test_id("produce")
    form.get_by_test_id("produce-key").fill("k1")
    form.get_by_test_id("produce-value").fill('{"order": {"id": 42}, "note": "needle-in-hay"}')
    form.get_by_test_id("produce-headers").fill("source=console-test")
    form.get_by_test_id("produce-send").click()
    notice(page, "ok", "Produced to partition")
    # browse, newest first: the form's record is there with its header
    page.get_by_test_id("msg-browse").click()
    notice(page, "ok", "record(s)")
    expect(page.get_by_test_id("records-table")).to_contain_text("needle-in-hay")
    expect(page.get_by_test_id("records-table")).to_contain_text("source: console-test")
    # search by value substring: streamed, with a progress count, one match of 301
    page.get_by_test_id("msg-start").select_option("oldest")
    page.get_by_test_id("search-value").fill("needle")
    page.get_by_test_id("msg-search").click()
    expect(page.get_by_test_id("search-progress")).to_contain_text("done: scanned 301 of 301, 1")
    expect(page.get_by_test_id("search-table").locator("tbody tr")).to_have_count(1)
    # by header and by JSON path too
    page.get_by_test_id("search-value").fill("")
    page.get_by_test_id("search-json").fill("order.id=42")
    page.get_by_test_id("search-header").fill("source=console-test")
    page.get_by_test_id("msg-search").click()
    expect(page.get_by_test_id("search-progress")).to_contain_text("1 match(es)")
    expect(page.get_by_test_id("search-table")).to_contain_text("needle-in-hay")
    # the topic list shows its size (from the node's admin HTTP) and message count
    row = _get(env.console + "/api/topics?q=console-msgs")[1]["topics"][0]
    assert row["messages"] == 301 and row["size_bytes"] > 301 * 8, row
    # a malformed offset is a clear error
    page.get_by_test_id("msg-start").select_option("offset")
    page.get_by_test_id("msg-at").fill("12x")
    page.get_by_test_id("msg-browse").click()
    notice(page, "error", "the offset must be an integer")


def test_group_lag_chart_and_reset(page: Page, env: Env) -> None:
    create_topic(env, "console-lag", 1)
    produce(env.node.bootstrap, "console-lag", [b"r%d" % i for i in range(20)])
    c = Consumer({"bootstrap.servers": env.node.bootstrap, "group.id": "console-group",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("console-lag", 0, 0)])
    got = 0
    deadline = time.monotonic() + 60
    while got < 5 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    c.commit(offsets=[TopicPartition("console-lag", 0, 5)], asynchronous=False)
    c.close()  # the consumer stops with 15 records left
    page.goto(env.console + "/groups")
    page.get_by_test_id("groups-table").get_by_role("link", name="console-group").click()
    expect(page.get_by_test_id("total-lag")).to_have_text("15")
    expect(page.get_by_test_id("lag-table")).to_contain_text("console-lag")
    expect(page.get_by_test_id("group-status")).to_have_text(re.compile("^(OK|WARN|ERR)$"))
    # the sampler (every 5 s) records the lag; the chart (plotly) draws it
    wait_until(lambda: int(page.get_by_test_id("lag-samples").get_attribute("data-count")
                           or 0) >= 1, "a lag sample in the chart")
    expect(page.get_by_test_id("lag-chart").locator(".main-svg").first).to_be_visible()
    # the history is a file in the node's data dir, so it outlives a console restart
    with contextlib.closing(sqlite3.connect(env.node.data_dir / "console-lag-history.sqlite3")) as db:
        assert db.execute("SELECT count(*) FROM lag WHERE grp = 'console-group' AND total = 15"
                          ).fetchone()[0] >= 1
    # the console dies: the node starts it again, and the history is still there
    before = len(_get(f"{env.console}/api/groups/console-group/history")[1]["samples"])
    assert env.node.proc is not None
    children = [c for c in psutil.Process(env.node.proc.pid).children()
                if "console" in c.cmdline()]
    assert len(children) == 1, children
    children[0].kill()
    children[0].wait(30)
    wait_until(lambda: _get(env.console + "/api/info")[0] == 200, "the restarted console")
    after = _get(f"{env.console}/api/groups/console-group/history")[1]["samples"]
    assert len(after) >= before and after[0]["total"] == 15
    # reset to earliest: the dry run shows the plan and writes nothing
    page.get_by_test_id("reset-mode").select_option("earliest")
    page.get_by_test_id("reset-dry-run").click()
    notice(page, "ok", "nothing was written")
    preview = page.get_by_test_id("plan-preview").locator("tbody tr")
    expect(preview).to_have_count(1)
    expect(preview).to_contain_text("5")
    assert _get(f"{env.console}/api/groups/console-group")[1]["total_lag"] == 15
    page.get_by_test_id("reset-apply").click()
    notice(page, "ok", "Reset 1 partition(s) of console-group")
    expect(page.get_by_test_id("total-lag")).to_have_text("20")
    # a malformed offset in the reset is refused with a message
    page.get_by_test_id("reset-mode").select_option("offset")
    page.get_by_test_id("reset-value").fill("abc")
    page.get_by_test_id("reset-dry-run").click()
    notice(page, "error", "the offset must be an integer")


def test_avro_topic_decoded_through_the_registry(page: Page, env: Env) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    create_topic(env, "console-avro", 1)
    schema = json.dumps({"type": "record", "name": "Click", "fields": [
        {"name": "user", "type": "string"}, {"name": "n", "type": "int"}]})
    ser = AvroSerializer(SchemaRegistryClient({"url": env.registry}), schema)
    raw = ser({"user": "ada-lovelace", "n": 7},
              SerializationContext("console-avro", MessageField.VALUE))
    produce(env.node.bootstrap, "console-avro", [raw])
    page.goto(env.console + "/messages?topic=console-avro")
    page.get_by_test_id("msg-browse").click()
    table = page.get_by_test_id("records-table")
    expect(table).to_contain_text("avro #")
    expect(table).to_contain_text('"user": "ada-lovelace"')
    # and the schema's page: its subject, versions, a diff and compatibility
    from confluent_kafka.schema_registry import Schema

    v2 = json.dumps({"type": "record", "name": "Click", "fields": [
        {"name": "user", "type": "string"}, {"name": "n", "type": "int"},
        {"name": "page", "type": "string", "default": "home"}]})
    SchemaRegistryClient({"url": env.registry}).register_schema("console-avro-value",
                                                                Schema(v2, "AVRO"))
    page.goto(env.console + "/schemas/console-avro-value")
    expect(page.get_by_test_id("schema-text")).to_contain_text('"default": "home"')
    page.get_by_test_id("diff-from").select_option("1")
    page.get_by_test_id("diff-to").select_option("2")
    page.get_by_role("button", name="Diff").click()
    expect(page.get_by_test_id("diff").locator(".add")).to_contain_text(['"name": "page"'])
    page.get_by_test_id("compat-level").select_option("FULL")
    page.get_by_role("button", name="Set").click()
    notice(page, "ok", "Compatibility is now FULL")


def test_security_pages_and_a_console_logged_in_as_a_scram_user(page: Page, env: Env,
                                                              tmp_path: Path) -> None:
    for name in ("console-sec-ok", "console-sec-no"):
        create_topic(env, name)
    page.goto(env.console + "/security")
    users = page.get_by_test_id("user-form")
    users.locator("input[name=user]").fill("alice")
    users.locator("input[name=password]").fill("alice-secret")
    users.get_by_role("button", name="Save").click()
    notice(page, "ok", "Saved the credentials of alice")
    expect(page.get_by_test_id("users-table")).to_contain_text("SCRAM-SHA-256 (4096)")
    acl = page.get_by_test_id("acl-form")
    acl.locator("input[name=principal]").fill("alice")  # not TYPE:NAME
    acl.locator("select[name=operation]").select_option("DESCRIBE")
    acl.locator("input[name=resource]").fill("console-sec-ok")
    acl.get_by_role("button", name="Add").click()
    notice(page, "error", "a principal is TYPE:NAME")
    acl.locator("input[name=principal]").fill("User:alice")
    acl.get_by_role("button", name="Add").click()
    notice(page, "ok", "ALLOW User:alice DESCRIBE on TOPIC console-sec-ok")
    expect(page.get_by_test_id("acls-table")).to_contain_text("User:alice")
    # a console that logs in as alice sees what her ACLs let her see, and is refused the rest
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [*ODRADEK, "console", "-b", env.sasl, "--listeners", url,
         "--history", str(tmp_path / "alice-lag.sqlite3"),
         "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=SCRAM-SHA-256",
         "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _get(url + "/api/info")[0] == 200, "alice's console")
        page.goto(url + "/topics")
        page.get_by_test_id("topic-search").fill("console-sec")
        rows = page.get_by_test_id("topics-table").locator("tbody tr")
        expect(rows).to_have_count(1)
        expect(rows).to_contain_text("console-sec-ok")
        req = urllib.request.Request(url + "/api/topics", method="POST",
                                     data=json.dumps({"name": "console-sec-new"}).encode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=60)
        assert "AUTHORIZATION_FAILED" in json.loads(refused.value.read())["error"]
    finally:
        proc.terminate()
        proc.wait(30)


def _quotas_by_cli(env: Env, user: str) -> set[tuple[str, str, float]]:
    """(client id, quota, value) of `user`'s quotas as `odradek quota describe` lists them."""
    res = subprocess.run([*ODRADEK, "quota", "describe", "--user", user, "--format", "json",
                          "-b", env.node.bootstrap], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return {(r["client_id"], r["quota"], r["value"]) for r in json.loads(res.stdout)}


def test_client_quotas_set_listed_and_removed(page: Page, env: Env) -> None:
    # user quotas only: no client of the other tests logs in as quota-carol, so nothing else
    # on the shared node is throttled
    page.goto(env.console + "/security")
    form = page.get_by_test_id("quota-form")
    form.locator("select[name=type]").select_option("user")
    form.locator("input[name=name]").fill("quota-carol")
    form.locator("select[name=key]").select_option("producer_byte_rate")
    form.locator("input[name=value]").fill("-5")
    form.get_by_role("button", name="Set").click()
    notice(page, "error", "producer_byte_rate must be a positive number, got -5")
    form.locator("input[name=value]").fill("1048576")
    form.get_by_role("button", name="Set").click()
    notice(page, "ok", "Set producer_byte_rate = 1048576 for user=quota-carol.")
    # the default client id of that user: listed as <default>
    form.locator("input[name=client]").fill("<default>")
    form.locator("select[name=key]").select_option("request_percentage")
    form.locator("input[name=value]").fill("12.5")
    form.get_by_role("button", name="Set").click()
    notice(page, "ok", "Set request_percentage = 12.5 for user=quota-carol, client-id=<default>.")
    table = page.get_by_test_id("quotas-table")
    expect(table).to_contain_text("user=quota-carol, client-id=<default>")
    own = table.locator("tbody tr").filter(has_text=re.compile(r"user=quota-carol\s*producer"))
    expect(own).to_contain_text("1048576")
    assert _quotas_by_cli(env, "quota-carol") == {("", "producer_byte_rate", 1048576),
                                                  ("<default>", "request_percentage", 12.5)}
    # the node's own refusal (odradek does not enforce ip quotas) is shown as it is
    form.locator("select[name=type]").select_option("ip")
    form.locator("input[name=name]").fill("10.0.0.9")
    form.locator("input[name=client]").fill("")
    form.locator("select[name=key]").select_option("connection_creation_rate")
    form.locator("input[name=value]").fill("10")
    form.get_by_role("button", name="Set").click()
    notice(page, "error", "INVALID_REQUEST: ip quotas")
    # an entity type Kafka does not have, through the API the page uses
    req = urllib.request.Request(env.console + "/api/quotas", method="POST", data=json.dumps(
        {"entity": [{"type": "group", "name": "g"}], "key": "producer_byte_rate",
         "value": 1}).encode())
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(req, timeout=60)
    assert bad.value.code == 400
    assert "unknown entity type 'group'" in json.loads(bad.value.read())["error"]
    for quota in ("producer_byte_rate", "request_percentage"):
        row = table.locator("tbody tr").filter(has_text="quota-carol").filter(has_text=quota)
        row.get_by_role("button", name="Remove").click()
        notice(page, "ok", f"Removed {quota} of user=quota-carol")
    expect(page.get_by_test_id("quotas")).not_to_contain_text("quota-carol")
    assert _quotas_by_cli(env, "quota-carol") == set()


def offsets_shown(page: Page) -> list[int]:
    """The Offset column of the browse table, top to bottom."""
    rows = page.get_by_test_id("records-table").locator("tbody tr")
    return [int(rows.nth(i).locator("td").nth(1).inner_text().replace(",", ""))
            for i in range(rows.count())]


def test_browse_by_timestamp_newest_and_oldest_first(page: Page, env: Env) -> None:
    create_topic(env, "console-time", 1)
    base = int(time.time() * 1000) - 600_000  # ten records a second apart, ten minutes ago
    p = Producer({"bootstrap.servers": env.node.bootstrap, "acks": "all"})
    for i in range(10):
        p.produce("console-time", value=b"t%d" % i, partition=0, timestamp=base + 1000 * i)
    assert p.flush(30) == 0
    # what a Kafka client finds for the time the page is given: offset 5
    c = Consumer({"bootstrap.servers": env.node.bootstrap, "group.id": "console-time-probe"})
    try:
        found = c.offsets_for_times([TopicPartition("console-time", 0, base + 5000)], 30)
    finally:
        c.close()
    assert found[0].offset == 5, found
    page.goto(env.console + "/messages?topic=console-time")
    page.get_by_test_id("msg-start").select_option("timestamp")
    page.get_by_test_id("msg-at").fill(str(base + 5000))
    page.get_by_test_id("msg-order").select_option("oldest")
    page.get_by_test_id("msg-browse").click()
    notice(page, "ok", "Read 5 record(s)")
    assert offsets_shown(page) == [5, 6, 7, 8, 9]
    page.get_by_test_id("msg-order").select_option("newest")
    page.get_by_test_id("msg-browse").click()
    expect(page.get_by_test_id("records-table").locator("tbody tr").first
           ).to_contain_text("t9")
    assert offsets_shown(page) == [9, 8, 7, 6, 5]
    # an ISO time (UTC) finds the same records as its milliseconds
    iso = datetime.datetime.fromtimestamp((base + 7000) / 1000, datetime.UTC).isoformat()
    page.get_by_test_id("msg-at").fill(iso)
    page.get_by_test_id("msg-browse").click()
    notice(page, "ok", "Read 3 record(s)")
    assert offsets_shown(page) == [9, 8, 7]
    # the newest three, either way round
    page.get_by_test_id("msg-start").select_option("newest")
    page.get_by_test_id("msg-limit").fill("3")
    page.get_by_test_id("msg-order").select_option("oldest")
    page.get_by_test_id("msg-browse").click()
    expect(page.get_by_test_id("records-table").locator("tbody tr").first).to_contain_text("t7")
    assert offsets_shown(page) == [7, 8, 9]
    page.get_by_test_id("msg-order").select_option("newest")
    page.get_by_test_id("msg-browse").click()
    expect(page.get_by_test_id("records-table").locator("tbody tr").first).to_contain_text("t9")
    assert offsets_shown(page) == [9, 8, 7]
    # a time that is not one is a clear error
    page.get_by_test_id("msg-start").select_option("timestamp")
    page.get_by_test_id("msg-at").fill("yesterday-ish")
    page.get_by_test_id("msg-browse").click()
    notice(page, "error", "yesterday-ish")


def produce_to(bootstrap: str, topic: str, partition: int, value: bytes) -> None:
    # the producer is gone when this returns: a live one refreshing its metadata would
    # create the topic again after it is deleted (auto.create.topics.enable)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    p.produce(topic, value=value, partition=partition)
    assert p.flush(30) == 0


def test_add_partitions_then_delete_the_topic(page: Page, env: Env) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": env.node.bootstrap})

    def partitions(topic: str) -> int | None:
        # all topics: a Metadata request naming a deleted topic would create it again
        # (auto.create.topics.enable, as in Kafka)
        t = admin.list_topics(timeout=30).topics.get(topic)
        return None if t is None or t.error is not None else len(t.partitions)

    create_topic(env, "console-grow", 2)
    page.goto(env.console + "/topics/console-grow")
    expect(page.get_by_test_id("partitions-table").locator("tbody tr")).to_have_count(2)
    grow = page.get_by_test_id("add-partitions")
    grow.locator("input[name=total]").fill("5")
    grow.get_by_role("button", name="Add").click()
    notice(page, "ok", "console-grow now has 5 partitions")
    expect(page.get_by_test_id("partitions-table").locator("tbody tr")).to_have_count(5)
    # the partitions are really there: a client sees five and produces to the last one
    wait_until(lambda: partitions("console-grow") == 5, "five partitions in Metadata")
    produce_to(env.node.bootstrap, "console-grow", 4, b"into-the-new-one")
    # fewer partitions than there are is refused with Kafka's error
    grow = page.get_by_test_id("add-partitions")
    grow.locator("input[name=total]").fill("3")
    grow.get_by_role("button", name="Add").click()
    notice(page, "error", "INVALID_PARTITIONS")
    assert partitions("console-grow") == 5
    # delete: asked to confirm, then gone for a client too
    page.get_by_test_id("delete-topic").click()
    page.get_by_test_id("confirm-delete-topic").click()
    notice(page, "ok", "Deleted topic console-grow")
    expect(page).to_have_url(re.compile(r"/topics$"))
    wait_until(lambda: partitions("console-grow") is None, "the topic gone from Metadata")
    assert _get(env.console + "/api/topics/console-grow")[0] == 404


def test_delete_a_consumer_group(page: Page, env: Env) -> None:
    from confluent_kafka.admin import AdminClient

    create_topic(env, "console-gone", 1)
    produce(env.node.bootstrap, "console-gone", [b"a", b"b"])
    c = Consumer({"bootstrap.servers": env.node.bootstrap, "group.id": "console-doomed",
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition("console-gone", 0, 1)], asynchronous=False)
    c.close()
    admin = AdminClient({"bootstrap.servers": env.node.bootstrap})

    def listed() -> set[str]:
        groups = admin.list_consumer_groups(request_timeout=30).result(timeout=60)
        return {g.group_id for g in groups.valid}

    assert "console-doomed" in listed()
    page.goto(env.console + "/groups/console-doomed")
    expect(page.get_by_test_id("total-lag")).to_have_text("1")
    page.get_by_test_id("delete-group").click()
    page.get_by_test_id("confirm-delete-group").click()
    notice(page, "ok", "Deleted group console-doomed")
    expect(page).to_have_url(re.compile(r"/groups$"))
    # gone for a client: not listed, and its committed offset with it
    assert "console-doomed" not in listed()
    c = Consumer({"bootstrap.servers": env.node.bootstrap, "group.id": "console-doomed"})
    try:
        committed = c.committed([TopicPartition("console-gone", 0)], timeout=30)
    finally:
        c.close()
    assert committed[0].offset < 0, committed  # OFFSET_INVALID: nothing committed
    # a group that no longer exists is said so
    page.goto(env.console + "/groups/console-doomed")
    notice(page, "error", "console-doomed")


def test_protobuf_topic_decoded_through_the_registry(page: Page, env: Env) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.integration.test_registry_protobuf import order_class

    Order = order_class()
    create_topic(env, "console-proto", 1)
    ctx = SerializationContext("console-proto", MessageField.VALUE)
    ser = ProtobufSerializer(Order, SchemaRegistryClient({"url": env.registry}),
                             {"use.deprecated.format": False})
    msg = Order(id="order-4711", tags=["gift", "express"], status=1)
    msg.total.currency, msg.total.cents = "EUR", 1999
    msg.placed.seconds = 1_700_000_000
    raw = ser(msg, ctx)
    produce(env.node.bootstrap, "console-proto", [raw])
    # a Kafka client reads back what was written
    de = ProtobufDeserializer(Order, {"use.deprecated.format": False},
                              schema_registry_client=SchemaRegistryClient({"url": env.registry}))
    assert de(raw, ctx) == msg
    page.goto(env.console + "/messages?topic=console-proto")
    page.get_by_test_id("msg-browse").click()
    table = page.get_by_test_id("records-table")
    expect(table).to_contain_text("protobuf #")
    # the fields by name, the imported message's and the enum's too
    expect(table).to_contain_text('"id": "order-4711"')
    expect(table).to_contain_text('"currency": "EUR"')
    expect(table).to_contain_text("express")
    expect(table).to_contain_text("PAID")


def test_bad_input_answers_4xx_with_a_message(env: Env) -> None:
    base = env.console
    for path, status in (("/api/nothing", 404), ("/api/topics?page=x", 400),
                         ("/api/topics?size=100000", 400), ("/api/topics/none-such", 404),
                         ("/api/topics/console-msgs/messages?limit=0", 400),
                         ("/api/topics/console-msgs/search", 400),
                         ("/api/groups/none-such/history?minutes=-1", 400),
                         ("/api/topics?q=" + "x" * 5000, 414)):
        code, body = _get(base + path)
        assert code == status, (path, code, body)
        assert body["error"], path
    req = urllib.request.Request(base + "/api/topics", data=b"{not json", method="POST")
    try:
        urllib.request.urlopen(req, timeout=10)
        pytest.fail("a malformed body was accepted")
    except urllib.error.HTTPError as exc:
        assert exc.code == 400
        assert "JSON" in json.loads(exc.read())["error"]
    assert _get(base + "/api/overview")[0] == 200  # and the console is unaffected
    assert env.node.alive()


def test_an_unusable_console_listener_is_refused(tmp_path: Path) -> None:
    def serve(*settings: str) -> subprocess.CompletedProcess[str]:
        cmd = [*ODRADEK, "serve", "--data-dir", str(tmp_path / "d"),
               "--set", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
               "--set", "schema.registry.listeners=", "--set", "admin.listeners="]
        for s in settings:
            cmd += ["--set", s]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        res = serve(f"console.listeners=http://127.0.0.1:{taken.getsockname()[1]}")
    assert res.returncode == 2, res.stderr
    assert "console.listeners" in res.stderr and "in use" in res.stderr
    # alone, the same: a clear line and exit 2, nothing served
    res = subprocess.run([*ODRADEK, "console", "-b", "127.0.0.1:1", "--listeners", "ftp://x:1"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "http://host:port" in res.stderr, res.stderr
