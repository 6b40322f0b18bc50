"""`odradek group list|describe|reset-offsets|delete`: consumer groups, like kafka-consumer-groups.

Committed offsets, members and log end offsets come through the Kafka admin
API (confluent-kafka). The lag status (Burrow's evaluation, kept by the node
from the history of commits) comes from the node itself: a DescribeGroups
request from this tool gets it in a tagged field that other clients skip.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

import typer
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    TimeoutOption,
    client_overrides,
    describe_error,
    fail,
    kafka_errors,
    result,
)
from odradek.client import admin_client
from odradek.client.config import resolve_bootstrap

app = typer.Typer(help="List, describe, reset and delete consumer groups.", no_args_is_help=True)

LAG_CLIENT_ID = "odradek-group-cli"
LAG_TRAILER = b"ODRADEK-LAG"
INACTIVE_STATES = ("Empty", "Dead", "Unknown", "EMPTY", "DEAD", "UNKNOWN")


def _admin(bootstrap: str, client_config: list[str]) -> AdminClient:
    return admin_client(bootstrap, client_overrides(client_config))


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance",
            "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable",
            "EMPTY": "Empty", "DEAD": "Dead", "UNKNOWN": "Unknown",
            "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}.get(name, name.title())


def _table(rows: list[list[Any]], header: list[str]) -> str:
    data = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in data) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in data)


# ------------------------------------------------------------------ list


_STATES = {s.lower(): s for s in ("Empty", "Stable", "PreparingRebalance",
                                   "CompletingRebalance", "Dead", "Assigning", "Reconciling")}


@app.command("list")
def list_groups(
    state: list[str] = typer.Option([], "--state", help="Only groups in this state (repeatable)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """List the groups (GROUP TYPE STATE)."""
    wanted = set()
    for s in state:
        if s.lower() not in _STATES:
            fail(f"unknown state {s!r}: use one of {', '.join(_STATES.values())}", code=2)
        wanted.add(s.lower())
    with kafka_errors():
        admin = _admin(bootstrap, client_config)
        listing = result(admin.list_consumer_groups(request_timeout=timeout), timeout)
    rows = []
    for g in sorted(listing.valid, key=lambda g: g.group_id):
        st = _state_name(g.state)
        if wanted and st.lower() not in wanted:
            continue
        gtype = getattr(getattr(g, "type", None), "name", "CLASSIC").lower()
        rows.append([g.group_id, gtype if gtype != "unknown" else "classic", st])
    for err in listing.errors:
        print(f"Error: {err}", file=sys.stderr)
    print(_table(rows, ["GROUP", "TYPE", "STATE"]))


# ------------------------------------------------------------------ describe


@dataclass
class _Member:
    member_id: str
    host: str
    client_id: str
    partitions: list[tuple[str, int]]


def _describe(admin: AdminClient, group: str, timeout: float) -> Any:
    futures = admin.describe_consumer_groups([group], request_timeout=timeout)
    return result(futures[group], timeout)


def _members(desc: Any) -> list[_Member]:
    out = []
    for m in desc.members or []:
        tps = [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions
                                                    if m.assignment else [])]
        out.append(_Member(m.member_id, m.host, m.client_id, tps))
    return out


def _committed(admin: AdminClient, group: str, timeout: float) -> dict[tuple[str, int], int]:
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=timeout)
    res = result(futures[group], timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or []
            if tp.offset >= 0}


def _offsets(admin: AdminClient, tps: list[tuple[str, int]], spec: Any,
             timeout: float) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                 request_timeout=timeout)
    out = {}
    for tp, fut in futures.items():
        out[(tp.topic, tp.partition)] = result(fut, timeout).offset
    return out


def node_lag(bootstrap: str, group: str, timeout: float) -> dict[str, Any] | None:
    """The node's lag evaluation of a group (None when the node does not give one)."""
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    from odradek.protocol.messages import encode_request

    host, _, port = resolve_bootstrap(bootstrap).split(",")[0].rpartition(":")
    body = encode_request(DescribeGroupsRequest(groups=(group,),
                                                include_authorized_operations=False))
    client = LAG_CLIENT_ID.encode()
    # request header v2: api key 15, version 5, correlation id, client id, no tags
    header = struct.pack(">hhih", 15, 5, 1, len(client)) + client + b"\x00"
    try:
        with socket.create_connection((host.strip("[]") or "localhost", int(port)),
                                      timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
            size = struct.unpack(">i", _recv(sock, 4))[0]
            frame = _recv(sock, size)
    except (OSError, ValueError, struct.error):
        return None
    if not frame.endswith(LAG_TRAILER):
        return None
    n = struct.unpack(">i", frame[-len(LAG_TRAILER) - 4:-len(LAG_TRAILER)])[0]
    payload = frame[-len(LAG_TRAILER) - 4 - n:-len(LAG_TRAILER) - 4]
    try:
        return json.loads(payload).get(group)  # type: ignore[no-any-return]
    except (ValueError, AttributeError):
        return None


def _recv(sock: socket.socket, n: int) -> bytes:
    if n < 0 or n > 64 * 1024 * 1024:
        raise ValueError(f"bad frame size {n}")
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ValueError("connection closed")
        buf += chunk
    return bytes(buf)


@app.command("describe")
def describe(
    group: str = typer.Argument(..., help="The group."),
    members: bool = typer.Option(False, "--members", help="One line per member."),
    state: bool = typer.Option(False, "--state", help="The group's state and coordinator."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Offsets and lag per partition (kafka-consumer-groups --describe), plus the lag status."""
    with kafka_errors():
        admin = _admin(bootstrap, client_config)
        desc = _describe(admin, group, timeout)
        st = _state_name(desc.state)
        mem = _members(desc)
        if state:
            coord = desc.coordinator
            print(_table([[group, f"{coord.host}:{coord.port} ({coord.id})" if coord else None,
                           desc.partition_assignor or "", st, len(mem)]],
                         ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE",
                          "#MEMBERS"]))
            return
        if members:
            if not mem:
                print(f"Consumer group '{group}' has no active members.")
                return
            print(_table([[group, m.member_id, m.host, m.client_id, len(m.partitions)]
                          for m in mem], ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID",
                                          "#PARTITIONS"]))
            return
        committed = _committed(admin, group, timeout)
        if st == "Dead" and not committed:
            fail(f"Consumer group '{group}' does not exist.")
        owner = {tp: m for m in mem for tp in m.partitions}
        tps = sorted(set(committed) | set(owner))
        ends = _offsets(admin, tps, OffsetSpec.latest(), timeout)
        lag_info = node_lag(bootstrap, group, timeout) or {}
        statuses = {(r[0], r[1]): r for r in lag_info.get("partitions", [])}
    if not mem:
        print(f"Consumer group '{group}' has no active members.")
    rows = []
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = end - cur if cur is not None and end is not None else None
        m = owner.get(tp)
        node = statuses.get(tp)
        rows.append([group, tp[0], tp[1], cur, end, lag, m.member_id if m else None,
                     m.host if m else None, m.client_id if m else None,
                     node[5] if node else "OK", node[4] if node else 0])
    print(_table(rows, ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CONSUMER-ID", "HOST", "CLIENT-ID", "STATUS", "LAG-MS"]))
    print(f"\nGroup status: {lag_info.get('status', 'OK')}")


# ------------------------------------------------------------------ reset-offsets


_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 PnDTnHnMnS (Kafka's --by-duration) in milliseconds."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT"):
        raise ValueError(f"bad duration {text!r}: use PnDTnHnMnS, e.g. PT10M or P1DT2H")
    d, h, mi, s = (float(m.group(k) or 0) for k in "dhms")
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: YYYY-MM-DDTHH:mm:SS[.sss][zone]; no zone means local time."""
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    try:
        dt = datetime.datetime.fromisoformat(t)
    except ValueError:
        raise ValueError(f"bad datetime {text!r}: use YYYY-MM-DDTHH:mm:SS.sss") from None
    if dt.tzinfo is None:
        dt = dt.astimezone()
    return int(dt.timestamp() * 1000)


def _parse_topic_specs(specs: list[str]) -> list[tuple[str, list[int] | None]]:
    out = []
    for spec in specs:
        name, _, parts = spec.partition(":")
        if not name:
            raise ValueError(f"bad --topic {spec!r}: use TOPIC or TOPIC:P,P")
        try:
            out.append((name, [int(p) for p in parts.split(",")] if parts else None))
        except ValueError:
            raise ValueError(f"bad partitions in --topic {spec!r}") from None
    return out


def _read_plan_file(path: str) -> dict[tuple[str, int], int]:
    out = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row or not row[0].strip() or row[0].startswith("#"):
                continue
            if len(row) < 3:
                raise ValueError(f"bad line in {path}: {','.join(row)} (want TOPIC,PARTITION,OFFSET)")
            out[(row[0].strip(), int(row[1]))] = int(row[2])
    return out


@app.command("reset-offsets")
def reset_offsets(
    group: str = typer.Argument(..., help="The group (must have no active members)."),
    topic: list[str] = typer.Option([], "--topic", help="TOPIC or TOPIC:P,P (repeatable)."),
    all_topics: bool = typer.Option(False, "--all-topics", help="Every topic the group has "
                                    "offsets for."),
    to_earliest: bool = typer.Option(False, "--to-earliest"),
    to_latest: bool = typer.Option(False, "--to-latest"),
    to_offset: int | None = typer.Option(None, "--to-offset"),
    shift_by: int | None = typer.Option(None, "--shift-by"),
    to_datetime: str | None = typer.Option(None, "--to-datetime",
                                           help="YYYY-MM-DDTHH:mm:SS.sss"),
    by_duration: str | None = typer.Option(None, "--by-duration", help="PnDTnHnMnS"),
    from_file: str | None = typer.Option(None, "--from-file", help="CSV: TOPIC,PARTITION,OFFSET"),
    execute: bool = typer.Option(False, "--execute", help="Apply the plan (default: show it)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Show (or with --execute apply) new committed offsets for a stopped group."""
    modes = [to_earliest, to_latest, to_offset is not None, shift_by is not None,
             to_datetime is not None, by_duration is not None, from_file is not None]
    if sum(modes) != 1:
        fail("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
             "--to-datetime, --by-duration, --from-file", code=2)
    if from_file is None and bool(topic) == all_topics:
        fail("give --topic or --all-topics", code=2)
    try:
        specs = _parse_topic_specs(topic)
        file_plan = _read_plan_file(from_file) if from_file else None
        ts = (parse_datetime_ms(to_datetime) if to_datetime else
              int(datetime.datetime.now().timestamp() * 1000) - parse_duration_ms(by_duration)
              if by_duration else None)
    except (ValueError, OSError) as exc:
        fail(str(exc), code=2)
    with kafka_errors():
        admin = _admin(bootstrap, client_config)
        desc = _describe(admin, group, timeout)
        st = _state_name(desc.state)
        if desc.members or st not in ("Empty", "Dead", "Unknown"):
            fail(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                 f"current state is {st}.")
        committed = _committed(admin, group, timeout)
        tps = _target_partitions(admin, specs, all_topics, committed, file_plan, timeout)
        earliest = _offsets(admin, tps, OffsetSpec.earliest(), timeout)
        latest = _offsets(admin, tps, OffsetSpec.latest(), timeout)
        plan: dict[tuple[str, int], int] = {}
        by_time = _offsets(admin, tps, OffsetSpec.for_timestamp(ts), timeout) \
            if ts is not None else {}
        for tp in tps:
            lo, hi = earliest[tp], latest[tp]
            if to_earliest:
                new = lo
            elif to_latest:
                new = hi
            elif to_offset is not None:
                new = to_offset
            elif shift_by is not None:
                new = committed.get(tp, lo) + shift_by
            elif file_plan is not None:
                new = file_plan[tp]
            else:
                new = by_time.get(tp, -1)
                if new < 0:
                    new = hi
            # Kafka clamps a reset into the log's range
            plan[tp] = min(max(new, lo), hi)
        if execute:
            res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())])],
                request_timeout=timeout)
            result(res[group], timeout)
    print(_table([[group, t, p, o] for (t, p), o in sorted(plan.items())],
                  ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]))
    if not execute:
        print("\n(plan only: add --execute to apply it)")


def _target_partitions(admin: AdminClient, specs: list[tuple[str, list[int] | None]],
                       all_topics: bool, committed: dict[tuple[str, int], int],
                       file_plan: dict[tuple[str, int], int] | None,
                       timeout: float) -> list[tuple[str, int]]:
    if file_plan is not None and not specs and not all_topics:
        return sorted(file_plan)
    if all_topics:
        names = sorted({t for t, _ in committed})
        specs = [(n, None) for n in names]
    meta = admin.list_topics(timeout=timeout)
    out = []
    for name, parts in specs:
        t = meta.topics.get(name)
        if t is None or t.error is not None:
            fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name} not found")
        existing = sorted(t.partitions)
        for p in parts if parts is not None else existing:
            if p not in t.partitions:
                fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name} has no partition {p}")
            out.append((name, p))
    if file_plan is not None:
        missing = [tp for tp in out if tp not in file_plan]
        if missing:
            fail(f"{missing[0][0]}:{missing[0][1]} is not in the file")
    return out


# ------------------------------------------------------------------ delete


@app.command("delete")
def delete(
    group: list[str] = typer.Argument(..., help="Group(s) to delete."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Delete groups and their committed offsets (refused while they have members)."""
    failed = False
    with kafka_errors():
        admin = _admin(bootstrap, client_config)
        futures = admin.delete_consumer_groups(group, request_timeout=timeout)
        for gid, fut in futures.items():
            try:
                result(fut, timeout)
                print(f"Deletion of requested consumer groups ('{gid}') was successful.")
            except Exception as exc:  # one group's error must not hide the others
                print(f"Error: group '{gid}': {describe_error(exc)}", file=sys.stderr)
                failed = True
    if failed:
        raise typer.Exit(1)


__all__ = ["app", "node_lag", "parse_datetime_ms", "parse_duration_ms"]
