"""Issue 18: Debian's real `prometheus` scrapes a real node. `promtool check rules` passes on
docs/prometheus/alerts.yml, Prometheus loads those rules, every query of the Grafana
dashboard (docs/grafana/odradek.json) is valid PromQL to it, and a PromQL query through its
HTTP API sees the count of messages a client produced."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess, free_port
from tests.support.metrics import get, get_json, wait_for
from tests.support.requests import produce
from tests.support.wire import Conn, Rec, build_batch_v2

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "docs" / "prometheus" / "alerts.yml"
DASHBOARD = ROOT / "docs" / "grafana" / "odradek.json"


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: it comes with Debian's `prometheus` package (the "
                    "Makefile's DEB_PACKAGES; `make setup-test` installs it)")
    return path


def test_promtool_checks_the_alerting_rules() -> None:
    res = subprocess.run([tool("promtool"), "check", "rules", str(ALERTS)],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_prometheus_scrapes_a_node_and_sees_a_produced_count(tmp_path: Path) -> None:
    node = BrokerProcess(tmp_path / "data").start()
    prom_port = free_port()
    config = tmp_path / "prometheus.yml"
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files: [alerts.yml]\n"
        "scrape_configs:\n  - job_name: odradek\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{node.admin_port}']\n")
    log = open(tmp_path / "prometheus.log", "wb")  # noqa: SIM115 - handed to the child
    prom = subprocess.Popen(
        [tool("prometheus"), f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=log, stderr=subprocess.STDOUT)
    log.close()
    api = f"http://127.0.0.1:{prom_port}/api/v1"

    def query(expr: str) -> dict:  # type: ignore[type-arg]
        status, body = get_json(f"{api}/query?query={urllib.parse.quote(expr)}")
        assert status == 200 and body["status"] == "success", (expr, body)
        return body["data"]  # type: ignore[no-any-return]

    try:
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        admin.create_topics([NewTopic("scraped", 1, 1)])["scraped"].result(30)
        def ready() -> bool:
            try:
                return get(f"http://127.0.0.1:{prom_port}/-/ready")[0] == 200
            except OSError:  # not listening yet (its log may still be empty)
                if prom.poll() is not None:
                    pytest.fail(f"prometheus exited with {prom.returncode}: "
                                f"{(tmp_path / 'prometheus.log').read_text()[-2000:]}")
                return False

        wait_for(ready, "prometheus ready")

        def target_up() -> bool:
            status, body = get_json(f"{api}/targets")
            return status == 200 and any(t["health"] == "up"
                                         for t in body["data"]["activeTargets"])

        wait_for(target_up, "the node's admin HTTP as an up target")
        batch = build_batch_v2([Rec(None, b"m%d" % i, [], 1_700_000_000_000)
                                for i in range(11)])
        with Conn(node.port) as conn:
            resp = conn.request(produce(9, "scraped", 0, batch))
            assert resp.responses[0].partition_responses[0].error_code == 0

        def produced() -> float:
            result = query('kafka_server_brokertopicmetrics_messagesin_total{topic="scraped"}')
            return float(result["result"][0]["value"][1]) if result["result"] else 0.0

        wait_for(lambda: produced() == 11, "Prometheus to see 11 messages in")
        assert query("sum(kafka_controller_kafkacontroller_activecontrollercount)"
                     )["result"][0]["value"][1] == "1"

        status, rules = get_json(f"{api}/rules")
        assert status == 200, rules
        names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
        assert {"KafkaUnderReplicatedPartitions", "KafkaOfflinePartitions",
                "KafkaNoActiveController", "KafkaConsumerGroupLagGrowing",
                "KafkaLogDiskFilling"} <= names

        # every dashboard query parses and runs (Grafana's variables filled in)
        dashboard = json.loads(DASHBOARD.read_text())
        exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
        assert len(exprs) >= 15
        for expr in exprs:
            query(expr.replace("$job", ".*").replace("$__rate_interval", "1m"))
        # and the panels that matter have data from a single node
        assert query(next(e for e in exprs if "underreplicatedpartitions" in e)
                     .replace("$job", ".*"))["result"]
    finally:
        prom.terminate()
        try:
            prom.wait(30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        node.stop()
