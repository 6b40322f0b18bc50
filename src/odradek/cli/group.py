"""`odradek group list|describe|reset-offsets|delete`: consumer groups, like kafka-consumer-groups.

Committed offsets, members and log end offsets come through the Kafka admin
API (confluent-kafka). The lag status (Burrow's evaluation, kept by the node
from the history of commits) comes from the node itself: a DescribeGroups
request from this tool gets it in a tagged field that other clients skip.
"""

from __future__ import annotations

import csv
import datetime
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    client_overrides,
    describe_error,
    fail,
    kafka_errors,
    native_security,
    result,
    usage,
)
from odradek.cli.common import admin as connect_admin
from odradek.cli.table import FormatOption, check_format, emit, render_table
from odradek.client.group_lag import node_lag

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

    from odradek.cli import group_share

app = typer.Typer(help="List, describe, reset and delete consumer groups.", no_args_is_help=True)

INACTIVE_STATES = ("Empty", "Dead", "Unknown", "EMPTY", "DEAD", "UNKNOWN")


def _admin(bootstrap: str, client_config: list[str],
           command_config: Path | None = None) -> AdminClient:
    return connect_admin(bootstrap, client_config, command_config)


def _missing(group: str) -> NoReturn:
    fail(f"Consumer group '{group}' does not exist.")


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return {"PREPARING_REBALANCING": "PreparingRebalance",
            "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable",
            "EMPTY": "Empty", "DEAD": "Dead", "UNKNOWN": "Unknown",
            "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}.get(name, name.title())


# ------------------------------------------------------------------ list


_STATES = {s.lower(): s for s in ("Empty", "Stable", "PreparingRebalance",
                                   "CompletingRebalance", "Dead", "Assigning", "Reconciling")}


_TYPES = ("classic", "consumer", "share")
TypeOption = typer.Option(None, "--type", metavar="TYPE",
                          help="The group type: share for share groups (KIP-932), as "
                               "kafka-share-groups does.")


def _check_type(group_type: str | None) -> bool:
    """Whether the command is for a share group (--type share)."""
    if group_type is not None and group_type.lower() not in _TYPES:
        usage(f"unknown group type {group_type!r}: use one of {', '.join(_TYPES)}")
    return group_type is not None and group_type.lower() == "share"


def _share(bootstrap: str, client_config: list[str], command_config: Path | None,
           timeout: float) -> group_share.ShareGroups:
    from odradek.cli import group_share  # the wire client: only when --type share
    return group_share.ShareGroups(bootstrap, timeout,
                                   native_security(client_config, command_config))


def _share_rows(bootstrap: str, client_config: list[str], command_config: Path | None,
                timeout: float, states: set[str], types: set[str]) -> list[tuple[str, str]]:
    from odradek.client.connection import fetch_supports

    if types and "share" not in types:
        return []
    overrides = {k: str(v) for k, v in client_overrides(client_config, command_config).items()}
    if not types and not fetch_supports(overrides):
        # a plain `group list` under security settings only librdkafka speaks: the share
        # groups (which need this tool's own requests) are left out, and it says so
        print("Note: share groups are not listed (--type share needs TLS with PEM files or "
              "SASL PLAIN/SCRAM).", file=sys.stderr)
        return []
    return _share(bootstrap, client_config, command_config, timeout).list(states)


@app.command("list")
def list_groups(
    state: list[str] = typer.Option([], "--state", metavar="STATE",
                                    help="Only groups in this state (repeatable): "
                                         + ", ".join(_STATES.values()) + "."),
    group_type: list[str] = typer.Option([], "--type", metavar="TYPE",
                                         help="Only groups of this type (repeatable): "
                                              + ", ".join(_TYPES) + "."),
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """List the groups (GROUP TYPE STATE)."""
    check_format(fmt)
    wanted = set()
    for s in state:
        if s.lower() not in _STATES:
            usage(f"unknown state {s!r}: use one of {', '.join(_STATES.values())}")
        wanted.add(s.lower())
    types = {t.lower() for t in group_type}
    for t in types:
        _check_type(t)
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)
        listing = result(admin.list_consumer_groups(request_timeout=timeout), timeout)
        # librdkafka knows no share type (it calls them UNKNOWN): ListGroups v5 names them
        shares = _share_rows(bootstrap, client_config, command_config, timeout, wanted,
                             types)
    share_ids = {g for g, _ in shares}
    rows = []
    for g in sorted(listing.valid, key=lambda g: g.group_id):
        st = _state_name(g.state)
        if g.group_id in share_ids or (wanted and st.lower() not in wanted):
            continue
        gtype = getattr(getattr(g, "type", None), "name", "CLASSIC").lower()
        rows.append([g.group_id, gtype if gtype != "unknown" else "classic", st])
    rows = sorted([r for r in rows if not types or r[1] in types]
                  + [[g, "share", st] for g, st in shares])
    for err in listing.errors:
        print(f"Error: {describe_error(err)}", file=sys.stderr)
    emit(["GROUP", "TYPE", "STATE"], rows, fmt)


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
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                request_timeout=timeout)
    res = result(futures[group], timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or []
            if tp.offset >= 0}


def _offsets(admin: AdminClient, tps: list[tuple[str, int]], spec: Any,
             timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                 request_timeout=timeout)
    out = {}
    for tp, fut in futures.items():
        out[(tp.topic, tp.partition)] = result(fut, timeout).offset
    return out


DESCRIBE_HELP = """Offsets and lag per partition (kafka-consumer-groups --describe), the group's
total lag, and the node's lag status of each partition and of the group.

\b
LAG        LOG-END-OFFSET minus CURRENT-OFFSET: records written but not yet
           consumed (committed). TOTAL-LAG is the sum over the partitions.
LAG-MS     how long ago the group was last caught up on the partition
           (0 while its lag is 0).
STATUS     the node's evaluation of the partition's last 10 commits, by
           Burrow's rules, checked in this order:
  OK       the lag is 0.
  REWIND   a member committed an offset below an earlier one. (A reset by
           `group reset-offsets` while the group is empty is deliberate: it
           starts the evaluation afresh instead.)
  STOP     commits stopped while lag remains: the last commit is older than
           the time the last 10 commits spanned (a consumer that exited, e.g.
           after `consume -n 10`, with records left).
  STALL    10 commits in a row kept the same offset while lag remains: the
           consumer is stuck.
  WARN     the offset moves, but the lag grew at each of the last 10
           commits: the consumer falls behind.
  OK       none of the above.
Group status: ERR if any partition is STOP, STALL or REWIND; WARN if any is
WARN; else OK. Reading lag step by step: docs/lag.md in odradek's source.
"""

LAG_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID", "STATUS", "LAG-MS"]

_REASONS = {"STOP": "commits stopped while lag remains", "STALL": "the offset does not move",
            "REWIND": "a committed offset went backwards", "WARN": "the lag keeps growing"}


def group_status_line(status: str, partition_statuses: list[str]) -> str:
    """`Group status: ERR (partition STOP: commits stopped while lag remains)`."""
    worst = [s for s in ("REWIND", "STALL", "STOP", "WARN") if s in partition_statuses]
    if status == "OK" or not worst:
        return f"Group status: {status}"
    return f"Group status: {status} ({worst[0]} on a partition: {_REASONS[worst[0]]})"


@app.command("describe", help=DESCRIBE_HELP)
def describe(
    group: str = typer.Argument(..., help="The group."),
    members: bool = typer.Option(False, "--members", help="One line per member."),
    state: bool = typer.Option(False, "--state", help="The group's state and coordinator."),
    group_type: str | None = TypeOption,
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    from confluent_kafka.admin import OffsetSpec

    check_format(fmt)
    if _check_type(group_type):
        from odradek.cli import group_share
        group_share.describe_command(_share(bootstrap, client_config, command_config,
                                            timeout), group, members, state, fmt)
        return
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)
        desc = _describe(admin, group, timeout)
        st = _state_name(desc.state)
        mem = _members(desc)
        committed = _committed(admin, group, timeout)
        if st == "Dead" and not committed:
            _missing(group)
        if state:
            coord = desc.coordinator
            emit(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                 [[group, f"{coord.host}:{coord.port} ({coord.id})" if coord else None,
                   desc.partition_assignor or "", st, len(mem)]], fmt)
            return
        if members:
            if not mem and fmt != "json":
                print(f"Consumer group '{group}' has no active members.")
                return
            emit(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                 [[group, m.member_id, m.host, m.client_id, len(m.partitions)] for m in mem],
                 fmt)
            return
        owner = {tp: m for m in mem for tp in m.partitions}
        tps = sorted(set(committed) | set(owner))
        ends = _offsets(admin, tps, OffsetSpec.latest(), timeout)
        lag_info = node_lag(bootstrap, group, timeout, {
            k: str(v) for k, v in client_overrides(client_config, command_config).items()
        }) or {}
        statuses = {(r[0], r[1]): r for r in lag_info.get("partitions", [])}
    rows = []
    total = 0
    for tp in tps:
        cur = committed.get(tp)
        end = ends.get(tp)
        lag = end - cur if cur is not None and end is not None else None
        total += lag or 0
        m = owner.get(tp)
        node = statuses.get(tp)
        rows.append([group, tp[0], tp[1], cur, end, lag, m.member_id if m else None,
                     m.host if m else None, m.client_id if m else None,
                     node[5] if node else "OK", node[4] if node else 0])
    status = lag_info.get("status", "OK")
    if fmt == "json":
        emit(LAG_HEADER, rows, fmt, extra={"group": group, "state": st, "members": len(mem),
                                           "total_lag": total, "group_status": status})
        return
    if not mem:
        print(f"Consumer group '{group}' has no active members.\n")
    print(render_table(LAG_HEADER, rows))
    print(f"\nTOTAL-LAG: {total}")
    print(group_status_line(status, [r[9] for r in rows]))


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
    group: str = typer.Argument(..., help="The group (must exist and have no active members)."),
    topic: list[str] = typer.Option([], "--topic", metavar="TOPIC[:P,P]",
                                    help="A topic, or some of its partitions (repeatable)."),
    all_topics: bool = typer.Option(False, "--all-topics", help="Every topic the group has "
                                    "offsets for."),
    to_earliest: bool = typer.Option(False, "--to-earliest",
                                     help="To each partition's earliest offset."),
    to_latest: bool = typer.Option(False, "--to-latest",
                                   help="To each partition's log end offset."),
    to_offset: int | None = typer.Option(None, "--to-offset", metavar="OFFSET",
                                         help="To this offset (kept within the log's range)."),
    shift_by: int | None = typer.Option(None, "--shift-by", metavar="N",
                                        help="Move each committed offset by N (negative: back)."),
    to_datetime: str | None = typer.Option(
        None, "--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
        help="To the first record at or after this time (local time unless a zone is given)."),
    by_duration: str | None = typer.Option(
        None, "--by-duration", metavar="PnDTnHnMnS",
        help="To the first record at or after this long ago, e.g. PT10M."),
    from_file: str | None = typer.Option(None, "--from-file", metavar="CSV",
                                         help="To the offsets in a CSV file of "
                                              "TOPIC,PARTITION,OFFSET lines."),
    execute: bool = typer.Option(False, "--execute", help="Apply the plan (default: show it)."),
    group_type: str | None = TypeOption,
    fmt: str = FormatOption,
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Show (or with --execute apply) new committed offsets for a stopped group."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    check_format(fmt)
    modes = [to_earliest, to_latest, to_offset is not None, shift_by is not None,
             to_datetime is not None, by_duration is not None, from_file is not None]
    if sum(modes) != 1:
        usage("give exactly one of --to-earliest, --to-latest, --to-offset, --shift-by, "
              "--to-datetime, --by-duration, --from-file")
    if from_file is None and bool(topic) == all_topics:
        usage("give --topic or --all-topics")
    try:
        specs = _parse_topic_specs(topic)
        file_plan = _read_plan_file(from_file) if from_file else None
        ts = (parse_datetime_ms(to_datetime) if to_datetime else
              int(datetime.datetime.now().timestamp() * 1000) - parse_duration_ms(by_duration)
              if by_duration else None)
    except (ValueError, OSError) as exc:
        usage(str(exc))
    share = _check_type(group_type)
    if share and shift_by is not None:
        usage("--shift-by moves committed offsets: a share group has start offsets (use "
              "--to-offset)")
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)
        if share:
            sg = _share(bootstrap, client_config, command_config, timeout)
            from odradek.cli import group_share
            where = group_share.check_inactive(sg, group)
            committed: dict[tuple[str, int], int] = {}
            tps = (sorted(file_plan) if file_plan is not None and not specs else
                   group_share.reset_targets(sg, group, where, specs, all_topics,
                                             admin.list_topics(timeout=timeout).topics))
        else:
            desc = _describe(admin, group, timeout)
            st = _state_name(desc.state)
            committed = _committed(admin, group, timeout)
            if st == "Dead" and not committed:
                _missing(group)
            if desc.members or st not in ("Empty", "Dead", "Unknown"):
                fail(f"Assignments can only be reset if the group '{group}' is inactive, "
                     f"but the current state is {st}.")
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
        if execute and share:
            from odradek.cli import group_share
            group_share.apply_reset(sg, group, where, plan)
        elif execute:
            res = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())])],
                request_timeout=timeout)
            result(res[group], timeout)
    emit(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
         [[group, t, p, o] for (t, p), o in sorted(plan.items())], fmt)
    if not execute and fmt != "json":
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
    group: list[str] = typer.Argument(..., metavar="GROUP...", help="Group(s) to delete."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Delete groups and their committed offsets (refused while they have members)."""
    failed = False
    with kafka_errors():
        admin = _admin(bootstrap, client_config, command_config)
        futures = admin.delete_consumer_groups(group, request_timeout=timeout)
        for gid, fut in futures.items():
            try:
                result(fut, timeout)
                print(f"Deletion of requested consumer groups ('{gid}') was successful.")
            except Exception as exc:  # one group's error must not hide the others
                text = describe_error(exc)
                if text.startswith("GROUP_ID_NOT_FOUND"):
                    text = f"Consumer group '{gid}' does not exist."  # as describe says it
                else:
                    text = f"group '{gid}': {text}"
                print(f"Error: {text}", file=sys.stderr)
                failed = True
    if failed:
        raise typer.Exit(1)


__all__ = ["app", "node_lag", "parse_datetime_ms", "parse_duration_ms"]
