"""`odradek partitions reassign|elect-leaders`, as kafka-reassign-partitions.sh and
kafka-leader-election.sh.

The plan file is Kafka's reassignment JSON: `{"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [2, 3, 4]}]}`. `reassign --plan` starts the moves
(AlterPartitionReassignments: the new replicas are added, caught up, and the old ones removed
by the controller); `--verify` says which are done (ListPartitionReassignments); `--wait`
waits for them all. `elect-leaders` asks for preferred (or, explicitly, unclean) elections.
"""

from __future__ import annotations

import json
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

app = typer.Typer(help="Move partition replicas and elect partition leaders.",
                  no_args_is_help=True)

ELECT_LEADERS = 43
ALTER_REASSIGNMENTS = 45
LIST_REASSIGNMENTS = 46
METADATA = 3
ELECTION_TYPES = {"preferred": 0, "unclean": 1}


def read_plan(path: Path) -> list[tuple[str, int, list[int] | None]]:
    """(topic, partition, replicas) from a reassignment JSON file; bad input -> ValueError."""
    try:
        plan = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("partitions"), list):
        raise ValueError(f"{path}: expected {{\"version\": 1, \"partitions\": [...]}}")
    out: list[tuple[str, int, list[int] | None]] = []
    seen = set()
    for i, item in enumerate(plan["partitions"]):
        try:
            topic, partition = str(item["topic"]), int(item["partition"])
            replicas = item.get("replicas")
            if replicas is not None:
                replicas = [int(r) for r in replicas]
                if not replicas or len(set(replicas)) != len(replicas):
                    raise ValueError("replicas must be distinct broker ids")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: partitions[{i}] is not "
                             f"{{topic, partition, replicas}}: {exc}") from None
        if (topic, partition) in seen:
            raise ValueError(f"{path}: {topic}-{partition} appears twice")
        seen.add((topic, partition))
        out.append((topic, partition, replicas))
    return out


def _error(code: int) -> str:
    from odradek.protocol.errors import ErrorCode

    return ErrorCode(code).name.upper()


# the TLS/SASL of this run's -X / --command-config (set once by the command: a CLI run is
# one command, and every request it sends goes the same way)
_security: Any = None


def _secure(client_config: list[str], command_config: Path | None) -> None:
    global _security
    _security = native_security(client_config, command_config)


def _call(bootstrap: str, api: int, version: int, values: dict[str, Any], timeout: float) -> Any:
    from odradek.broker.admin_calls import CallFailed, call

    try:
        return call(bootstrap, api, version, values, timeout, _security)
    except CallFailed as exc:
        fail(f"cannot reach the cluster: {exc}")


def _replicas(bootstrap: str, topics: list[str], timeout: float) -> dict[tuple[str, int], list[int]]:
    response = _call(bootstrap, METADATA, 12, {
        "topics": [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False, "include_topic_authorized_operations": False},
        timeout)
    return {(t.name, int(p.partition_index)): [int(r) for r in p.replica_nodes]
            for t in response.topics for p in t.partitions}


def _ongoing(bootstrap: str, timeout: float) -> dict[tuple[str, int], Any]:
    response = _call(bootstrap, LIST_REASSIGNMENTS, 0,
                     {"timeout": int(timeout * 1000), "topics": None}, timeout)
    if int(response.error_code) != 0:
        fail(f"ListPartitionReassignments: {_error(int(response.error_code))}"
             f"{': ' + response.error_message if response.error_message else ''}")
    return {(t.name, int(p.partition_index)): p for t in response.topics for p in t.partitions}


def _status(bootstrap: str, plan: list[tuple[str, int, list[int] | None]],
            timeout: float) -> list[tuple[str, str]]:
    """(partition, "done" | "moving" | "differs: ...") for each partition of the plan."""
    ongoing = _ongoing(bootstrap, timeout)
    current = _replicas(bootstrap, sorted({t for t, _, _ in plan}), timeout)
    out = []
    for topic, partition, replicas in plan:
        key, name = (topic, partition), f"{topic}-{partition}"
        if key in ongoing:
            out.append((name, "moving"))
        elif replicas is None or current.get(key) == replicas:
            out.append((name, "done"))
        else:
            out.append((name, f"differs: replica set is {current.get(key)} rather than "
                              f"{replicas}"))
    return out


def _verify(bootstrap: str, plan: list[tuple[str, int, list[int] | None]],
            timeout: float) -> list[str]:
    """One line per partition; the ones not done."""
    moving = []
    for name, state in _status(bootstrap, plan, timeout):
        if state == "done":
            print(f"Reassignment of partition {name} is completed.")
            continue
        if state == "moving":
            print(f"Reassignment of partition {name} is still in progress.")
        else:
            print(f"There is no active reassignment of partition {name}, but "
                  f"{state.split(': ', 1)[1]}.")
        moving.append(name)
    return moving


@app.command()
def reassign(
    plan_file: Path = typer.Option(..., "--plan", metavar="FILE",
                                   help="Kafka's reassignment JSON (a replicas of null "
                                        "cancels that partition's move)."),
    verify: bool = typer.Option(False, "--verify",
                                help="Only say which moves of the plan are done."),
    wait: bool = typer.Option(False, "--wait", help="Start, then wait until all are done."),
    bootstrap: str = BootstrapOption,
    timeout: float = TimeoutOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Move partition replicas (kafka-reassign-partitions --execute / --verify)."""
    _secure(client_config, command_config)
    try:
        plan = read_plan(plan_file)
    except ValueError as exc:
        usage(str(exc))
    if not plan:
        usage(f"{plan_file}: no partitions to reassign")
    if verify:
        raise typer.Exit(1 if _verify(bootstrap, plan, timeout) else 0)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition, replicas in plan:
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition,
             "replicas": None if replicas is None else tuple(replicas)})
    response = _call(bootstrap, ALTER_REASSIGNMENTS, 0, {
        "timeout": int(timeout * 1000),
        "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}, timeout)
    if int(response.error_code) != 0:
        fail(f"AlterPartitionReassignments: {_error(int(response.error_code))}"
             f"{': ' + response.error_message if response.error_message else ''}")
    failed = []
    for t in response.responses:
        for p in t.partitions:
            if int(p.error_code) != 0:
                failed.append(f"{t.name}-{int(p.partition_index)}: {_error(int(p.error_code))}"
                              f"{': ' + p.error_message if p.error_message else ''}")
    started = len(plan) - len(failed)
    print(f"Successfully started partition reassignment{'s' if started != 1 else ''} for "
          f"{started} of {len(plan)} partitions.")
    for line in failed:
        print(f"Error: {line}")
    if failed:
        raise typer.Exit(1)
    if wait:
        # done once the controller lists no move and the node we ask shows the new replicas
        # (its metadata follows the controller's a moment later)
        deadline = time.monotonic() + timeout
        while any(state != "done" for _, state in _status(bootstrap, plan, timeout)):
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
        raise typer.Exit(1 if _verify(bootstrap, plan, timeout) else 0)


@app.command("elect-leaders")
def elect_leaders(
    election_type: str = typer.Option("preferred", "--election-type", metavar="TYPE",
                                      help="preferred, or unclean (an out-of-sync replica "
                                           "may lead: acknowledged records can be lost)."),
    topic: str | None = typer.Option(None, "--topic", metavar="TOPIC",
                                     help="The topic (with --partition)."),
    partition: int | None = typer.Option(None, "--partition", metavar="N",
                                         help="The partition of --topic."),
    all_partitions: bool = typer.Option(False, "--all-topic-partitions",
                                        help="Every partition of every topic."),
    path: Path | None = typer.Option(None, "--path-to-json-file", metavar="FILE",
                                     help='{"partitions": [{"topic": .., "partition": ..}]}'),
    bootstrap: str = BootstrapOption,
    timeout: float = TimeoutOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
) -> None:
    """Elect partition leaders (kafka-leader-election)."""
    _secure(client_config, command_config)
    kind = ELECTION_TYPES.get(election_type.lower())
    if kind is None:
        usage("--election-type must be preferred or unclean")
    chosen = [all_partitions, topic is not None, path is not None]
    if sum(chosen) != 1:
        usage("give one of --all-topic-partitions, --topic with --partition, "
              "--path-to-json-file")
    targets: dict[str, list[int]] | None = None
    if topic is not None:
        if partition is None:
            usage("--topic needs --partition")
        targets = {topic: [partition]}
    elif path is not None:
        try:
            targets = {}
            for t, p, _ in read_plan(path):
                targets.setdefault(t, []).append(p)
        except ValueError as exc:
            usage(str(exc))
    response = _call(bootstrap, ELECT_LEADERS, 2, {
        "election_type": kind,
        "topic_partitions": None if targets is None else
        [{"topic": t, "partitions": tuple(ps)} for t, ps in targets.items()],
        "timeout": int(timeout * 1000)}, timeout)
    if int(response.error_code) != 0:
        fail(f"ElectLeaders: {_error(int(response.error_code))}")
    done, not_needed, failed = [], [], []
    for r in response.replica_election_results:
        for p in r.partition_result:
            name = f"{r.topic}-{int(p.partition_id)}"
            code = _error(int(p.error_code))
            if code == "NONE":
                done.append(name)
            elif code == "ELECTION_NOT_NEEDED":
                not_needed.append(name)
            else:
                failed.append(f"{name}: {code}{': ' + p.error_message if p.error_message else ''}")
    label = election_type.upper()
    if done:
        print(f"Successfully completed leader election ({label}) for partitions "
              f"{', '.join(sorted(done))}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(sorted(not_needed))}")
    for line in failed:
        print(f"Error: election ({label}) failed for {line}")
    if not (done or not_needed or failed):
        print("No partition needed an election.")
    raise typer.Exit(1 if failed else 0)
