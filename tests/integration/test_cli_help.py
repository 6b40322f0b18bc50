"""Issue 12, point 5: a CLI that reads like rpk: --version, help without type tags and with
every option described, `config list`, and `--format json` on every listing.

Each help text and listing comes from the real `odradek` command in a subprocess.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest
import typer.main

from odradek.cli.main import app
from odradek.metadata.config.broker_configs import BROKER_CONFIGS
from odradek.metadata.config.config_def import to_config_string
from odradek.metadata.config.topic_configs import TOPIC_CONFIGS
from tests.integration.cli_support import odradek, ok
from tests.integration.group_support import new_topic, produce
from tests.support.broker import BrokerProcess


def _command_paths() -> list[tuple[str, ...]]:
    """Every leaf command, e.g. ("topic", "create"), read from the app itself."""
    out: list[tuple[str, ...]] = []

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, (*path, name))
        else:
            out.append(path)

    walk(typer.main.get_command(app), ())
    return out


COMMANDS = _command_paths()


def test_version() -> None:
    assert ok("--version").strip() == f"odradek {version('odradek')}"
    assert ok("-V").strip() == f"odradek {version('odradek')}"


def test_every_command_is_found() -> None:
    assert {"topic list", "group describe", "config list", "transaction list", "consume",
            "serve"} <= {" ".join(p) for p in COMMANDS}


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_has_no_type_tags_and_defaults_as_typed(path: tuple[str, ...]) -> None:
    text = ok(*path, "--help")
    assert text.startswith(f"Usage: odradek {' '.join(path)} ")
    tags = re.findall(r"<(?:bool|str|int|float|list\[[a-z]+\]|Path|path)>", text)
    assert not tags, tags
    assert "{" + path[-1] not in text.split("\n")[0]  # no {name} for arguments
    # a float default is shown as typed (30, not 30.0); booleans are flags, not True/False
    assert not re.search(r"default: -?\d+\.0\b", text), text
    assert "default: False" not in text and "default: True" not in text


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_option_is_described(path: tuple[str, ...]) -> None:
    """Each option line of the help has a description after the option column."""
    text = ok(*path, "-h")
    section = text.split("\nOptions:\n", 1)[1]
    lines = section.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("  -"):
            continue
        head, _, rest = line.strip().partition("  ")
        described = rest.strip() or (i + 1 < len(lines) and lines[i + 1].startswith(" " * 8)
                                     and not lines[i + 1].strip().startswith("-"))
        assert described, f"{' '.join(path)}: {head} has no description"


def test_client_command_help_shows_metavars_and_defaults() -> None:
    text = ok("topic", "list", "--help")
    assert "--timeout SECONDS" in text and "[default: 30]" in text
    assert "-b, --bootstrap-server HOST:PORT" in text
    assert "default: localhost:9092" in text
    assert "--format text|json" in text


def test_serve_help_points_to_config_list() -> None:
    assert "odradek config list --broker" in " ".join(ok("serve", "--help").split())
    assert "odradek config list --topic" in " ".join(ok("topic", "create", "--help").split())


@pytest.mark.parametrize("kind,table", [("broker", BROKER_CONFIGS), ("topic", TOPIC_CONFIGS)])
def test_config_list_shows_every_key_with_type_default_and_doc(kind: str, table: dict) -> None:
    text = ok("config", "list", f"--{kind}")
    lines = text.splitlines()
    assert lines[0].split() == ["NAME", "TYPE", "DEFAULT", "DYNAMIC", "DOC"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == sorted(table)
    rows = json.loads(ok("config", "list", f"--{kind}", "--format", "json"))
    assert [r["name"] for r in rows] == sorted(table)
    for row in rows:
        defn = table[row["name"]]
        assert row["type"] == defn.type.name.lower()
        assert row["doc"] and defn.doc.startswith(row["doc"].rstrip("."))
        if defn.default is not None and not defn.sensitive:
            assert row["default"] == to_config_string(defn.default)
    by_name = {r["name"]: r for r in rows}
    if kind == "topic":
        assert by_name["retention.ms"]["default"] == "604800000"
        assert by_name["cleanup.policy"]["default"] == "delete"
    else:
        assert by_name["num.partitions"]["default"] == "1"
        assert by_name["auto.create.topics.enable"]["default"] == "true"


def test_listings_take_format_json(shared_broker: BrokerProcess) -> None:
    b = shared_broker.bootstrap
    topic = new_topic(b, "json-topic", partitions=2)
    produce(b, topic, 10)
    group_topic = new_topic(b, "json-group-topic", partitions=1)
    produce(b, group_topic, 10)
    ok("consume", group_topic, "-g", "json-g", "--from-beginning", "-n", "4", "-f", "%v\\n",
       bootstrap=b)

    topics = json.loads(ok("topic", "list", "--format", "json", bootstrap=b))
    assert {"name": topic, "partitions": 2, "replicas": 1} in topics

    [described] = json.loads(ok("topic", "describe", topic, "--offsets", "--format", "json",
                                bootstrap=b))
    assert described["topic"] == topic and described["partition_count"] == 2
    assert sum(p["high_watermark"] for p in described["partitions"]) == 10
    assert [p["partition"] for p in described["partitions"]] == [0, 1]

    groups = json.loads(ok("group", "list", "--format", "json", bootstrap=b))
    assert {"group": "json-g", "type": "classic", "state": "Empty"} in groups

    desc = json.loads(ok("group", "describe", "json-g", "--format", "json", bootstrap=b))
    assert desc["group"] == "json-g" and desc["state"] == "Empty"
    assert desc["total_lag"] == sum(r["lag"] for r in desc["rows"]) == 6
    assert [(r["topic"], r["partition"], r["current_offset"], r["log_end_offset"])
            for r in desc["rows"]] == [(group_topic, 0, 4, 10)]

    [state] = json.loads(ok("group", "describe", "json-g", "--state", "--format", "json",
                            bootstrap=b))
    assert state["state"] == "Empty" and state["members"] == 0

    plan = json.loads(ok("group", "reset-offsets", "json-g", "--all-topics", "--to-earliest",
                         "--format", "json", bootstrap=b))
    assert [(r["topic"], r["partition"], r["new_offset"]) for r in plan] == [(group_topic, 0, 0)]

    assert json.loads(ok("transaction", "list", "--format", "json", bootstrap=b)) == []


def test_tables_are_aligned_the_same_way(shared_broker: BrokerProcess) -> None:
    """Every column of every table starts at the same place on every line."""
    b = shared_broker.bootstrap
    new_topic(b, "align-topic-with-a-long-name", partitions=3)
    for args in (("topic", "list"), ("group", "list"), ("config", "list", "--topic")):
        lines = [ln for ln in ok(*args, bootstrap=None if args[0] == "config" else b)
                 .splitlines() if ln.strip()]
        header = lines[0]
        starts = [m.start() for m in re.finditer(r"(?:^|(?<=  ))\S", header)]
        for line in lines[1:]:
            for start in starts[1:]:
                assert line[start - 2:start] == "  " and line[start] != " ", (args, line)


def test_unknown_command_is_bad_usage() -> None:
    res = odradek("topik")
    assert res.returncode == 2
    assert "Error: No such command 'topik'" in res.stderr
