"""Schema Registry benchmark (issue 17): registrations/s and lookups/s under concurrent clients.

    python -m bench.registry_perf [--seconds 5] [--clients 1,4,8] [--write]

Starts a fresh `odradek serve` and one `odradek registry serve` over it, then for each client
count runs client processes, each with one keep-alive HTTP connection (as confluent-kafka's
httpx client keeps one), for `--seconds`:

- register: `POST /subjects/{s}/versions` of a new Avro schema each time (a new id and version;
  acks=all write to `_schemas`, answered once the reader applied it);
- by id: `GET /schemas/ids/{id}` over ids already registered (served from the in-memory view);
- lookup: `POST /subjects/{s}` of a registered schema (parse, canonicalize, compare).

The load average is printed beside the figures: on a shared machine it is part of the result.
`--write` replaces bench/RESULTS-h17.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from tests.integration.test_registry_api import RegistryProcess
from tests.support.broker import BrokerProcess

from bench.run import git_revision, machine

RESULTS = Path(__file__).parent / "RESULTS-h17.md"
CT = "application/vnd.schemaregistry.v1+json"


def schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "bench", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}]})


class Conn:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def call(self, method: str, path: str, body: object = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, path, body=data, headers={"Content-Type": CT})
        resp = self.conn.getresponse()
        raw = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{method} {path}: {resp.status} {raw[:200]!r}")
        return json.loads(raw)


def client(kind: str, url: str, worker: int, seconds: float, ids: list[int],
           start: float, out: mp.Queue) -> None:
    conn = Conn(url)
    while time.time() < start:  # every client begins together
        time.sleep(0.001)
    deadline = start + seconds
    done = i = 0
    while time.time() < deadline:
        if kind == "register":
            conn.call("POST", f"/subjects/bench-w{worker}/versions",
                      {"schema": schema(f"W{worker}N{i}")})
        elif kind == "by-id":
            conn.call("GET", f"/schemas/ids/{ids[i % len(ids)]}")
        else:
            conn.call("POST", f"/subjects/seed-{i % len(ids)}", {"schema": schema(f"S{i % len(ids)}")})
        i += 1
        done += 1
    out.put(done)


def phase(kind: str, url: str, clients: int, seconds: float, ids: list[int]) -> int:
    queue: mp.Queue = mp.Queue()
    start = time.time() + 0.5
    procs = [mp.Process(target=client, args=(kind, url, w, seconds, ids, start, queue))
             for w in range(clients)]
    for p in procs:
        p.start()
    total = sum(queue.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join()
    return total


def revision() -> str:
    """git_revision(), not counting this benchmark's own results file as a change."""
    import subprocess

    rev = git_revision()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True,
                           cwd=Path(__file__).parent).stdout.split("\n")
    if all(not line.strip() or line.strip().endswith(RESULTS.name) for line in dirty):
        rev = rev.replace(" (with uncommitted changes)", "")
    return rev


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,4,8")
    ap.add_argument("--seeds", type=int, default=50, help="schemas registered before lookups")
    ap.add_argument("--kinds", default="register,by-id,lookup")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    counts = [int(c) for c in args.clients.split(",")]
    rows: list[tuple[str, int, float, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="odradek-registry-bench-") as tmp:
        node = BrokerProcess(Path(tmp) / "data")
        node.start()
        reg = RegistryProcess(node.bootstrap, Path(tmp) / "registry.log").start()
        try:
            reg.call("PUT", "/config", {"compatibility": "NONE"})
            conn = Conn(reg.url)
            ids = [int(conn.call("POST", f"/subjects/seed-{i}/versions",  # type: ignore[index]
                                 {"schema": schema(f"S{i}")})["id"]) for i in range(args.seeds)]
            assert reg.proc is not None
            server = psutil.Process(reg.proc.pid)
            for kind in args.kinds.split(","):
                for n in counts:
                    before = server.cpu_times()
                    done = phase(kind, reg.url, n, args.seconds, ids)
                    after = server.cpu_times()
                    cpu = (after.user + after.system - before.user - before.system)
                    rate, cost = done / args.seconds, cpu / max(done, 1) * 1e6
                    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
                    rows.append((kind, n, rate, cost, load))
                    print(f"{kind:9} clients={n:2}  {rate:8.0f}/s  {cost:6.0f} us CPU/request  "
                          f"load {load}", flush=True)
        finally:
            reg.stop()
            node.stop()
    m = machine()
    lines = [
        "# Schema Registry (issue 17), helper h17",
        "",
        f"`python -m bench.registry_perf --seconds {args.seconds:g} --clients {args.clients}` "
        f"at {revision()}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {m.cores} cores "
        f"({m.cpu_model}), Python {m.python}. One `odradek serve` and one `odradek registry serve` "
        "on loopback; each client is a process with one keep-alive HTTP connection. The machine "
        "was shared with other helpers' work: the load average (1/5/15 min, at the end of each "
        "row) is part of the figure.",
        "",
        "| request | clients | per second | registry CPU per request | load average |",
        "|---|---:|---:|---:|---|",
        *[f"| {k} | {n} | {r:,.0f} | {c:,.0f} µs | {load} |" for k, n, r, c, load in rows],
        "",
        "register = `POST /subjects/{s}/versions` of a new schema (acks=all write to `_schemas`, "
        "answered after the reader applied it); by-id = `GET /schemas/ids/{id}` (in-memory "
        "view); lookup = `POST /subjects/{s}` of a registered schema (parse + canonical form). "
        "Registry CPU is the `odradek registry serve` process's user+system time over the "
        "phase divided by the requests answered (its reader and election threads included).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
