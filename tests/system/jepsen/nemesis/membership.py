"""A reassignment while nodes are killed: partition `p` of the first topic goes from three
replicas to two (one node leaves its replica set) while another node is killed -9; at the
heal the killed node starts again and the partition goes back to three replicas in a new
order (a new preferred leader). Started with `odradek partitions reassign` (Kafka's
kafka-reassign-partitions --execute), not waited for: the kill lands mid-move."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from odradek.broker.local_cluster import ODRADEK
from tests.system.jepsen.nemesis.base import Nemesis
from tests.system.jepsen.schedule import Fault

__all__ = ["ReassignNemesis"]


class ReassignNemesis(Nemesis):
    family = "reassign"

    def _reassign(self, partition: int, replicas: list[int], name: str) -> str:
        plan = self.ctx.workdir / name
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": self.ctx.topic, "partition": partition, "replicas": replicas}]}))
        bootstrap = self.ctx.cluster.bootstrap_of()
        done = subprocess.run([*ODRADEK, "partitions", "reassign", "--plan", str(plan)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "ODRADEK_BOOTSTRAP": bootstrap})
        return (done.stdout + done.stderr).strip()[-300:]

    def start(self, fault: Fault) -> dict[str, Any]:
        nodes = sorted(self.ctx.cluster.nodes)
        leaving = nodes[fault.pick % len(nodes)]
        victim = nodes[(fault.pick // 7 + 1 + nodes.index(leaving)) % len(nodes)]
        if victim == leaving:
            victim = nodes[(nodes.index(leaving) + 1) % len(nodes)]
        partition = fault.partition
        replicas = [n for n in nodes if n != leaving]
        said = self._reassign(partition, replicas, f"reassign-{fault.at}-a.json")
        self.ctx.cluster.kill9(victim)
        return {"partition": partition, "replicas": replicas, "killed": victim, "said": said}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        self.ctx.cluster.restart(state["killed"])
        nodes = sorted(self.ctx.cluster.nodes)
        k = fault.pick % len(nodes)
        replicas = nodes[k:] + nodes[:k]
        said = self._reassign(state["partition"], replicas, f"reassign-{fault.at}-b.json")
        return {"partition": state["partition"], "replicas": replicas,
                "restarted": state["killed"], "said": said}

    def heal_all(self) -> None:
        for node_id, node in self.ctx.cluster.nodes.items():
            if not node.alive():
                self.ctx.cluster.restart(node_id)
