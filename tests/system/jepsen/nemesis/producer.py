"""A producer crashing mid-transaction: a separate process (crasher.py) begins a transaction,
writes to partition `p` of the first topic and flushes, then is killed -9 before it commits.
At the heal a producer with the same transactional.id runs InitProducerId, which aborts the
open transaction; the history then says those sends failed, so a read_committed consumer
that ever returns them has read aborted data (G1a). Its values come from their own range
(CRASH_BASE + ...) so they never collide with a workload's."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.system.jepsen.nemesis.base import Nemesis
from tests.system.jepsen.schedule import Fault

__all__ = ["CRASH_BASE", "ProducerCrashNemesis"]

CRASH_BASE = 1_000_000_000
COUNT = 20


class ProducerCrashNemesis(Nemesis):
    family = "producer"
    n = 0

    def _cmd(self, partition: int, txn_id: str, first: int, *extra: str) -> list[str]:
        return [sys.executable, "-m", "tests.system.jepsen.crasher",
                self.ctx.cluster.client_bootstrap, self.ctx.topic, str(partition), txn_id,
                str(first), str(COUNT), *extra]

    def start(self, fault: Fault) -> dict[str, Any]:
        history = self.ctx.history
        self.n += 1
        partition = fault.partition
        first = CRASH_BASE + (fault.pick << 8) + self.n * COUNT
        txn_id = f"jepsen-crasher-{fault.pick}-{self.n}"
        key = f"{self.ctx.topic}-{partition}"
        sends = [["send", key, v] for v in range(first, first + COUNT)]
        op = history.invoke(f"crasher-{self.n}", "txn", sends) if history is not None else None
        proc = subprocess.Popen(self._cmd(partition, txn_id, first), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        line = ""
        try:
            line = proc.stdout.readline().strip()  # "sent", or "" if it died first
        finally:
            proc.kill()
            proc.wait()
        return {"txn_id": txn_id, "partition": partition, "first": first, "count": COUNT,
                "crashed_after": line or "nothing", "_op": op}

    def stop(self, fault: Fault, state: dict[str, Any]) -> dict[str, Any]:
        aborted = subprocess.run(self._cmd(state["partition"], state["txn_id"], state["first"],
                                           "--abort"), capture_output=True, text=True,
                                 timeout=180)
        ok = aborted.stdout.strip() == "aborted"
        op = state.pop("_op")
        if op is not None and self.ctx.history is not None:
            if ok:
                self.ctx.history.fail(op, op.value, "crashed mid-transaction; aborted by "
                                      "InitProducerId of the same transactional.id")
            else:
                self.ctx.history.info(op, op.value, "crashed mid-transaction; abort unknown")
        return {"txn_id": state["txn_id"], "aborted": ok}
