"""docs/pipelines.md's walkthrough, run as written: a new node, the example's generator,
`odradek pipeline run`, `odradek consume`; every output the page shows must be printed."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.broker import free_port

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "pipelines.md"
BIN = Path(sys.executable).parent
HEADING = "## Walkthrough"
DOC_ADDRESS = "localhost:9092"
DOC_DIR = "/tmp/pipeline-demo"


def walkthrough() -> list[tuple[str, list[str]]]:
    """(command, output lines shown under it) of every `$ ` line in the section's blocks."""
    text = DOC.read_text()
    start = text.index(HEADING)
    end = text.find("\n## ", start + len(HEADING))
    section = text[start:end if end >= 0 else None]
    steps: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", section, re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
    return steps


def normal(line: str) -> str:
    """Rates differ from run to run; the rest of a line does not."""
    return re.sub(r"[\d,.]+ rows/s", "N rows/s", line.strip())


def wait_listening(port: int, proc: subprocess.Popen[bytes], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the node exited"
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"no node listening on {port}")


# A node, a generator and one Spark driver: ~1 min idle, several under load.
@pytest.mark.timeout(1200)
def test_walkthrough_runs_as_documented(tmp_path: Path) -> None:
    steps = walkthrough()
    commands = [c for c, _ in steps]
    assert commands[0].startswith("odradek serve ") and any(c.startswith("odradek pipeline run ") for c in commands)
    port = free_port()
    demo = tmp_path / "pipeline-demo"

    def local(text: str) -> str:
        return text.replace(DOC_ADDRESS, f"127.0.0.1:{port}").replace(DOC_DIR, str(demo))

    env = {k: v for k, v in os.environ.items() if k != "ODRADEK_BOOTSTRAP"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # `odradek` and `python` of this venv
    serve_log = (tmp_path / "serve.log").open("wb")
    node = subprocess.Popen(shlex.split(local(commands[0])), cwd=ROOT, env=env, stdout=serve_log,
                            stderr=subprocess.STDOUT)
    try:
        wait_listening(port, node)
        for command, shown in steps[1:]:
            res = subprocess.run(["bash", "-c", f"set -o pipefail; {local(command)}"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=900)
            assert res.returncode == 0, f"{command}\n{res.stdout}\n{res.stderr[-5000:]}"
            printed = {normal(line) for line in res.stdout.splitlines()}
            missing = [line for line in shown if normal(line) not in printed]
            assert not missing, f"{command}\nnot printed: {missing}\nprinted:\n{res.stdout}"
            if command.startswith("odradek pipeline run "):
                # One line per batch of each flow, on stdout: the progress the page promises.
                assert re.search(r"flow 'slow_views': batch 0: 400 rows in, 68 rows out, [\d,]+ rows/s",
                                 res.stdout), res.stdout
                spark_log = (demo / "spark.log").read_text()
                # WARN from the JVM's first line: none of Spark's start-up INFO lines.
                assert "INFO" not in spark_log and "log4j profile" not in spark_log, spark_log[-5000:]
    finally:
        node.terminate()
        node.wait(60)
        serve_log.close()
    assert node.returncode == 0, (tmp_path / "serve.log").read_text()[-3000:]


def test_spark_log_level_must_be_a_level(tmp_path: Path) -> None:
    res = subprocess.run([str(BIN / "odradek"), "pipeline", "run", str(ROOT / "examples" / "sql_pipeline"),
                          "--spark-log-level", "LOUD", "--checkpoint-dir", str(tmp_path / "ck")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "--spark-log-level" in res.stderr and "LOUD" in res.stderr and "WARN" in res.stderr, res.stderr
    assert not (tmp_path / "ck").exists()
