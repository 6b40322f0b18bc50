"""Hand-made histories for the checker's tests: ops in memory, no file."""

from __future__ import annotations

from typing import Any

from tests.system.jepsen.history import Op


class Hist:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, process: Any, typ: str, f: str, value: Any, error: str | None = None) -> None:
        self.ops.append(Op(len(self.ops), len(self.ops) * 1000, process, typ, f, value, error))

    def op(
        self, process: Any, f: str, invoke: Any, typ: str, value: Any, error: str | None = None
    ) -> None:
        self._add(process, "invoke", f, invoke)
        self._add(process, typ, f, value, error)

    def send(
        self,
        process: Any,
        key: str,
        *pairs: tuple[int | None, int],
        typ: str = "ok",
        f: str = "send",
    ) -> None:
        inv = [["send", key, v] for _, v in pairs]
        done = [["send", key, [o, v]] for o, v in pairs] if typ == "ok" else inv
        self.op(process, f, inv, typ, done)

    def poll(
        self,
        process: Any,
        reads: dict[str, list[tuple[int, int]]],
        f: str = "poll",
        typ: str = "ok",
        rebalance: dict[str, list[str]] | None = None,
    ) -> None:
        value: list[Any] = []
        if rebalance is not None:
            value.append(["rebalance", rebalance])
        value.append(["poll", {k: [[o, v] for o, v in prs] for k, prs in reads.items()}])
        self.op(process, f, [["poll"]], typ, value)

    def event(self, process: Any, f: str, value: Any) -> None:
        self.op(process, f, value, "ok", value)

    def nemesis(self, f: str, value: Any = None) -> None:
        self._add("nemesis", "info", f, value)
