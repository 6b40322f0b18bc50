"""Issue 12, point 5: `odradek --help` and the client commands load no heavy library they do
not use (kio pulls in hypothesis; numpy, pyspark, rich). The times are in bench/, not here."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.broker import BrokerProcess

HEAVY = ("kio", "hypothesis", "numpy", "pyspark", "rich", "pyarrow")

# Runs the command in this process, then prints which top-level packages it loaded.
PROBE = """
import json, sys
from odradek.cli.main import app
try:
    app(sys.argv[1:], prog_name="odradek")
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})), file=sys.stderr)
"""


def loaded(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                          timeout=120)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_help_loads_no_client_library() -> None:
    mods = loaded("--help")
    assert not mods & {*HEAVY, "confluent_kafka"}, mods & {*HEAVY, "confluent_kafka"}
    mods = loaded("group", "describe", "--help")
    assert not mods & {*HEAVY, "confluent_kafka"}


def test_topic_list_loads_only_the_kafka_client(shared_broker: BrokerProcess) -> None:
    mods = loaded("topic", "list", "-b", shared_broker.bootstrap)
    assert "confluent_kafka" in mods  # it did run
    assert not mods & set(HEAVY), mods & set(HEAVY)
