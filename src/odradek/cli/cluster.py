"""`odradek cluster up|describe`: a local cluster of real processes, and a cluster's state.

`up` is rpk's one-command local cluster with processes instead of containers: it formats a
directory per node, starts them on free loopback ports, prints the bootstrap string, shows
the nodes' state while they run and stops them all on Ctrl-C. `describe` shows the brokers
(fenced or not, rack) and the metadata quorum as `kafka-metadata-quorum describe --status`
and `--replication` do.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    fail,
    native_security,
    usage,
)
from odradek.cli.table import FormatOption, check_format, render_table

app = typer.Typer(help="Run a local cluster, or describe a cluster's brokers and quorum.",
                  no_args_is_help=True)

def render_state(state: dict[str, Any]) -> str:
    lines = [f"ClusterId:              {state['cluster_id']}"]
    q = state["quorum"]
    if "error" in q:
        lines.append(f"Quorum:                 {q['error']}")
    else:
        lines += [
            f"LeaderId:               {q['leader_id']}",
            f"LeaderEpoch:            {q['leader_epoch']}",
            f"HighWatermark:          {q['high_watermark']}",
            f"MaxFollowerLag:         {q['max_follower_lag']}",
            f"MaxFollowerLagTimeMs:   {q['max_follower_lag_time_ms']}",
            f"CurrentVoters:          [{','.join(str(v['node_id']) for v in q['voters'])}]",
            f"CurrentObservers:       [{','.join(str(o['node_id']) for o in q['observers'])}]",
        ]
    lines.append("")
    lines.append(render_table(
        ["BROKER", "HOST", "PORT", "RACK", "STATE"],
        [[b["id"], b["host"], b["port"], b["rack"], "fenced" if b["fenced"] else "unfenced"]
         for b in state["brokers"]]))
    if "error" not in q:
        lines.append("")
        lines.append(render_table(
            ["NODEID", "LOGENDOFFSET", "LAG", "LASTFETCHTIMESTAMP", "LASTCAUGHTUPTIMESTAMP",
             "STATUS"],
            [[r["node_id"], r["log_end_offset"], r["lag"], r["last_fetch_ms"],
              r["last_caught_up_ms"], r["status"]] for r in q["voters"] + q["observers"]]))
    return "\n".join(lines)


@app.command()
def describe(
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    timeout: float = TimeoutOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Brokers (fenced or not, rack) and the metadata quorum: leader, epoch, high watermark,
    each voter's and observer's log end offset and lag (kafka-metadata-quorum describe
    --status --replication)."""
    from odradek.broker.admin_calls import CallFailed, cluster_state

    check_format(fmt)
    security = native_security(client_config, command_config)
    try:
        state = cluster_state(bootstrap, timeout, security)
    except CallFailed as exc:
        fail(f"cannot reach the cluster: {exc}")
    except (RuntimeError, ValueError) as exc:
        fail(str(exc))
    if fmt == "json":
        print(json.dumps(state, indent=2))
    else:
        print(render_state(state))


def _summary(cluster: Any, bootstrap: str) -> str:
    """One line: each node's process state, and what the cluster says of it."""
    from odradek.broker.admin_calls import cluster_state

    try:
        state = cluster_state(bootstrap, 3.0)
    except Exception:
        state = None
    fenced = {b["id"]: b["fenced"] for b in state["brokers"]} if state else {}
    quorum = state["quorum"] if state else {}
    parts = []
    for node in cluster.nodes.values():
        if node.alive():
            what = "up"
            if node.is_broker:
                what = {True: "fenced", False: "unfenced"}.get(fenced.get(node.node_id),
                                                                 "registering")
            if quorum.get("leader_id") == node.node_id:
                what += ",leader"
        else:
            what = f"exited({node.returncode})" if node.proc is not None else "down"
        parts.append(f"{node.node_id}:{what}")
    head = (f"epoch {quorum['leader_epoch']} hw {quorum['high_watermark']}"
            if quorum and "leader_epoch" in quorum else "no quorum leader yet")
    return f"[{time.strftime('%H:%M:%S')}] {head}; nodes " + " ".join(parts)


@app.command()
def up(
    nodes: int = typer.Option(3, "--nodes", "-n", metavar="N",
                              help="Broker nodes (combined broker+controller unless "
                                   "--controllers is given)."),
    data_dir: Path = typer.Option(Path("./cluster"), "--data-dir", metavar="DIR",
                                  help="Where the nodes' directories, configs and logs go; "
                                       "an existing one starts the same cluster again."),
    controllers: int | None = typer.Option(
        None, "--controllers", metavar="N",
        help="Run N controller-only nodes and --nodes broker-only nodes (split roles)."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="A config for every node (repeatable)."),
    interval: float = typer.Option(2.0, "--interval", metavar="SECONDS",
                                   help="How often the nodes' state is shown."),
) -> None:
    """Run a local cluster of real `odradek serve` processes on loopback until Ctrl-C."""
    from odradek.broker.local_cluster import LocalCluster
    from odradek.broker.server_properties import parse_overrides

    if nodes < 1 or (controllers is not None and controllers < 1):
        usage("--nodes and --controllers must be at least 1")
    try:
        settings = parse_overrides(set_)
    except ValueError as exc:
        usage(str(exc))
    cluster = LocalCluster.load(data_dir)
    if cluster is None:
        cluster = LocalCluster.plan(data_dir, nodes, controllers=controllers, settings=settings)
    else:
        cluster.settings.update(settings)
        print(f"Starting the cluster of {data_dir} again ({len(cluster.nodes)} nodes)")
    stopping = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        cluster.start()
    except Exception as exc:
        cluster.kill_all()
        fail(f"cannot start the cluster: {exc}")
    bootstrap = cluster.bootstrap
    print(f"Cluster {cluster.cluster_id}: {len(cluster.nodes)} nodes in {data_dir}")
    for node in cluster.nodes.values():
        where = [f"PLAINTEXT://{node.bootstrap}"] if node.is_broker else []
        if node.is_controller:
            where.append(f"CONTROLLER://127.0.0.1:{node.spec.controller_port}")
        print(f"  node {node.node_id} ({','.join(node.spec.roles)}): {' '.join(where)}"
              f"  log {node.log_path}")
    print(f"Bootstrap: {bootstrap}")
    print(f"  export ODRADEK_BOOTSTRAP={bootstrap}")
    print("Ctrl-C stops every node.", flush=True)
    last = ""
    while not stopping:
        line = _summary(cluster, bootstrap)
        if line.split("] ", 1)[1] != last:
            print(line, flush=True)
            last = line.split("] ", 1)[1]
        deadline = time.monotonic() + interval
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
    print("Stopping (brokers first, then controllers)...", flush=True)
    codes = cluster.stop()
    bad = {k: v for k, v in codes.items() if v not in (0, None)}
    print("Stopped." if not bad else f"Stopped; nodes exited with {bad}", flush=True)
    sys.exit(0 if not bad else 1)
