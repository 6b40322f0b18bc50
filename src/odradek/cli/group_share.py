"""`odradek group ... --type share`: share groups (KIP-932), as kafka-share-groups.sh shows
them. confluent-kafka's AdminClient has no share-group calls, so these go over the wire
themselves (broker.admin_calls): ListGroups v5 filtered by type, and at the group's
coordinator (FindCoordinator) ShareGroupDescribe, DescribeShareGroupOffsets and
AlterShareGroupOffsets. A share group's offsets can only be moved while it has no members
(the node answers NON_EMPTY_GROUP otherwise, as Kafka does; the tool checks first and says
so in kafka-share-groups' words)."""

from __future__ import annotations

from typing import Any

from odradek.cli.common import fail
from odradek.protocol.apis import ApiKey
from odradek.protocol.errors import ErrorCode

E = ErrorCode
GROUP_KEY = 0


def _name(code: int) -> str:
    return ErrorCode(code).name.upper()


class ShareGroups:
    """The share-group requests of one CLI run (`security`: native_security's settings)."""

    def __init__(self, bootstrap: str, timeout: float, security: Any = None) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.security = security

    def _call(self, where: str, api: int, version: int, values: dict[str, Any]) -> Any:
        from odradek.broker.admin_calls import CallFailed, call

        try:
            return call(where, api, version, values, self.timeout, self.security)
        except CallFailed as exc:
            fail(f"cannot reach the cluster: {exc}")

    def coordinator(self, group: str) -> tuple[str, int]:
        """(host:port, node id) of the group's coordinator."""
        r = self._call(self.bootstrap, ApiKey.FIND_COORDINATOR, 4,
                       {"key_type": GROUP_KEY, "coordinator_keys": [group]})
        c = r.coordinators[0]
        if c.error_code != E.none:
            fail(f"{_name(c.error_code)}: no coordinator for share group '{group}'")
        return f"{c.host}:{c.port}", int(c.node_id)

    # ------------------------------------------------------------------ list

    def list(self, states: set[str]) -> list[tuple[str, str]]:
        """(group, state) of every share group, filtered by lower-case state names."""
        r = self._call(self.bootstrap, ApiKey.LIST_GROUPS, 5,
                       {"states_filter": [], "types_filter": ["share"]})
        if r.error_code != E.none:
            fail(f"{_name(r.error_code)}: cannot list the groups")
        rows = [(g.group_id, g.group_state or "Unknown") for g in r.groups
                if (g.group_type or "share") == "share"]
        return sorted(r for r in rows if not states or r[1].lower() in states)

    # ------------------------------------------------------------------ describe

    def describe(self, group: str) -> tuple[Any, str, int]:
        """The ShareGroupDescribe entry, the coordinator's address and id."""
        where, node = self.coordinator(group)
        r = self._call(where, ApiKey.SHARE_GROUP_DESCRIBE, 1,
                       {"group_ids": [group], "include_authorized_operations": False})
        g = r.groups[0]
        if g.error_code == E.group_id_not_found:
            # a group known only by its persisted offsets (no members since the last
            # restart) is Empty; DescribeShareGroupOffsets tells the two apart
            return None, where, node
        if g.error_code != E.none:
            fail(f"{_name(g.error_code)}: {g.error_message or group}")
        return g, where, node

    def offsets(self, group: str, where: str) -> list[tuple[str, int, int, int, int, int]]:
        """(topic, partition, leader epoch, start offset, lag, error) of the group's
        share-partitions."""
        r = self._call(where, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 1,
                       {"groups": [{"group_id": group, "topics": None}]})
        g = r.groups[0]
        if g.error_code != E.none:
            fail(f"{_name(g.error_code)}: {g.error_message or group}")
        return sorted((t.topic_name, int(p.partition_index), int(p.leader_epoch),
                       int(p.start_offset), int(p.lag), int(p.error_code))
                      for t in g.topics for p in t.partitions)

    # ------------------------------------------------------------------ reset

    def alter(self, group: str, where: str, plan: dict[tuple[str, int], int]
              ) -> dict[tuple[str, int], int]:
        """AlterShareGroupOffsets: the new start offsets; the error per partition."""
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (t, p), o in sorted(plan.items()):
            by_topic.setdefault(t, []).append({"partition_index": p, "start_offset": o})
        r = self._call(where, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, {
            "group_id": group, "topics": [{"topic_name": t, "partitions": ps}
                                          for t, ps in by_topic.items()]})
        if r.error_code == E.non_empty_group:
            fail(f"Share group '{group}' is not empty: its offsets can only be reset while "
                 "it has no active members.")
        if r.error_code != E.none:
            fail(f"{_name(r.error_code)}: {r.error_message or group}")
        return {(t.topic_name, int(p.partition_index)): int(p.error_code)
                for t in r.responses for p in t.partitions}


def member_rows(group: str, desc: Any) -> list[list[Any]]:
    """kafka-share-groups --describe --members: GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS
    ASSIGNMENT."""
    rows = []
    for m in desc.members if desc is not None else []:
        tps = [(t.topic_name, int(p)) for t in m.assignment.topic_partitions
               for p in t.partitions]
        assignment = ",".join(f"{t}:{p}" for t, p in sorted(tps)) or "-"
        rows.append([group, m.member_id, m.client_host, m.client_id, len(tps), assignment])
    return rows


# ------------------------------------------------------------------ the commands' share paths


def describe_command(sg: ShareGroups, group: str, members: bool, state: bool, fmt: str
                     ) -> None:
    """`odradek group describe GROUP --type share [--members|--state]`."""
    from odradek.cli.table import emit

    desc, where, node = sg.describe(group)
    offsets = sg.offsets(group, where)
    if desc is None and not offsets:
        fail(f"Share group '{group}' does not exist.")
    st = desc.group_state if desc is not None else "Empty"
    count = len(desc.members) if desc is not None else 0
    if state:
        emit(["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
             [[group, f"{where} ({node})", st, count]], fmt)
        return
    if members:
        if not count and fmt != "json":
            print(f"Share group '{group}' has no active members.")
            return
        emit(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
             member_rows(group, desc), fmt)
        return
    if not count and fmt != "json":
        print(f"Share group '{group}' has no active members.\n")
    emit(["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"],
         [[group, t, p, None if e < 0 else e, None if s < 0 else s, None if lag < 0 else lag]
          for t, p, e, s, lag, _ in offsets], fmt)


def reset_targets(sg: ShareGroups, group: str, where: str, specs: list[tuple[str, Any]],
                  all_topics: bool, topics: Any) -> list[tuple[str, int]]:
    """The share-partitions a reset names: --topic specs (every partition when none is
    given), or --all-topics (every topic the group has a start offset for)."""
    if all_topics:
        names = sorted({t for t, *_ in sg.offsets(group, where)})
        specs = [(n, None) for n in names]
    out = []
    for name, parts in specs:
        t = topics.get(name)
        if t is None or t.error is not None:
            fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name} not found")
        for p in parts if parts is not None else sorted(t.partitions):
            if p not in t.partitions:
                fail(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name} has no partition {p}")
            out.append((name, p))
    return out


def check_inactive(sg: ShareGroups, group: str) -> str:
    """The coordinator's address of an existing share group with no members (as
    kafka-share-groups refuses a reset of an active group)."""
    desc, where, _ = sg.describe(group)
    if desc is None and not sg.offsets(group, where):
        fail(f"Share group '{group}' does not exist.")
    if desc is not None and desc.members:
        fail(f"Share group '{group}' is not empty: its offsets can only be reset while it "
             f"has no active members (state {desc.group_state}).")
    return where


def apply_reset(sg: ShareGroups, group: str, where: str, plan: dict[tuple[str, int], int]
                ) -> None:
    errors = {tp: c for tp, c in sg.alter(group, where, plan).items() if c != E.none}
    if errors:
        (t, p), code = sorted(errors.items())[0]
        fail(f"{_name(code)}: cannot reset {t}:{p} of share group '{group}'"
             + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
