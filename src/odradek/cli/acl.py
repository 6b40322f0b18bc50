"""`odradek acl create|list|delete`: ACLs, with kafka-acls' options.

`--allow-principal`/`--deny-principal` (repeatable), `--allow-host`/`--deny-host` (default
`*`), `--operation` (repeatable: Read, Write, Create, Delete, Alter, Describe, ClusterAction,
DescribeConfigs, AlterConfigs, IdempotentWrite, All), one resource: `--topic`, `--group`,
`--cluster`, `--transactional-id`, `--delegation-token`, and `--resource-pattern-type`
(literal, prefixed; for list/delete also any, match). CreateAcls and DeleteAcls go through
confluent-kafka's AdminClient; DescribeAcls through odradek's native client, since librdkafka
drops that answer's error (a refused listing would show as an empty table). Every command
takes -X and --command-config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    kafka_errors,
    native_call,
    result,
    usage,
)
from odradek.cli.common import admin as connect_admin
from odradek.cli.table import FormatOption, check_format, emit

app = typer.Typer(help="Create, list and delete ACLs (kafka-acls).", no_args_is_help=True)

_OPS = {"read": "READ", "write": "WRITE", "create": "CREATE", "delete": "DELETE",
        "alter": "ALTER", "describe": "DESCRIBE", "clusteraction": "CLUSTER_ACTION",
        "describeconfigs": "DESCRIBE_CONFIGS", "alterconfigs": "ALTER_CONFIGS",
        "idempotentwrite": "IDEMPOTENT_WRITE", "all": "ALL", "any": "ANY"}

AllowPrincipal = typer.Option([], "--allow-principal", metavar="TYPE:NAME",
                              help="Principal given ALLOW (repeatable), e.g. User:alice.")
DenyPrincipal = typer.Option([], "--deny-principal", metavar="TYPE:NAME",
                             help="Principal given DENY (repeatable).")
AllowHost = typer.Option([], "--allow-host", metavar="HOST", help="Host of ALLOW ACLs (default *).")
DenyHost = typer.Option([], "--deny-host", metavar="HOST", help="Host of DENY ACLs (default *).")
Operation = typer.Option([], "--operation", metavar="OP", help="Operation (repeatable).")
Topic = typer.Option(None, "--topic", metavar="NAME", help="A topic (or * for every one).")
Group = typer.Option(None, "--group", metavar="NAME", help="A consumer group.")
Cluster = typer.Option(False, "--cluster", help="The cluster resource.")
TxnId = typer.Option(None, "--transactional-id", metavar="ID", help="A transactional id.")
Token = typer.Option(None, "--delegation-token", metavar="ID", help="A delegation token.")
PatternOpt = typer.Option("literal", "--resource-pattern-type", metavar="TYPE",
                          help="literal or prefixed (list/delete: also any, match).")


def _resource(topic: str | None, group: str | None, cluster: bool, txn: str | None,
              token: str | None, required: bool) -> tuple[Any, str | None]:
    from confluent_kafka.admin import ResourceType

    given = [(ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
             (ResourceType.BROKER, "kafka-cluster" if cluster else None),
             (ResourceType.TRANSACTIONAL_ID, txn), (getattr(ResourceType, "DELEGATION_TOKEN",
                                                            None), token)]
    chosen = [(t, n) for t, n in given if n is not None]
    if len(chosen) > 1:
        usage("give one resource: --topic, --group, --cluster, --transactional-id or "
              "--delegation-token")
    if not chosen:
        if required:
            usage("a resource is required: --topic, --group, --cluster, --transactional-id or "
                  "--delegation-token")
        return ResourceType.ANY, None
    if chosen[0][0] is None:
        usage("this confluent-kafka has no DELEGATION_TOKEN resource type")
    return chosen[0]


def _pattern(name: str, creating: bool) -> Any:
    from confluent_kafka.admin import ResourcePatternType

    allowed = ("literal", "prefixed") if creating else ("literal", "prefixed", "any", "match")
    if name.lower() not in allowed:
        usage(f"--resource-pattern-type must be one of {', '.join(allowed)}")
    return ResourcePatternType[name.upper()]


def _operations(ops: list[str], default: str | None) -> list[Any]:
    from confluent_kafka.admin import AclOperation

    if not ops:
        if default is None:
            usage("give at least one --operation")
        ops = [default]
    out = []
    for op in ops:
        key = _OPS.get(op.replace("_", "").replace("-", "").lower())
        if key is None:
            usage(f"unknown operation {op!r}; one of {', '.join(sorted(_OPS))}")
        out.append(AclOperation[key])
    return out


def _entries(allow: list[str], deny: list[str], allow_hosts: list[str],
             deny_hosts: list[str]) -> list[tuple[str, str, Any]]:
    from confluent_kafka.admin import AclPermissionType

    out = [(p, h, AclPermissionType.ALLOW) for p in allow for h in (allow_hosts or ["*"])]
    out += [(p, h, AclPermissionType.DENY) for p in deny for h in (deny_hosts or ["*"])]
    for principal, _, _ in out:
        kind, sep, name = principal.partition(":")
        if not (kind and sep and name):
            usage(f"{principal!r} is not a principal of the form Type:name")
    return out


HEADER = ["RESOURCE_TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


@app.command("create")
def create(allow_principal: list[str] = AllowPrincipal, deny_principal: list[str] = DenyPrincipal,
           allow_host: list[str] = AllowHost, deny_host: list[str] = DenyHost,
           operation: list[str] = Operation, topic: str | None = Topic,
           group: str | None = Group, cluster: bool = Cluster, transactional_id: str | None = TxnId,
           delegation_token: str | None = Token, resource_pattern_type: str = PatternOpt,
           bootstrap: str = BootstrapOption, client_config: list[str] = ClientConfigOption,
           command_config: Path | None = CommandConfigOption,
           timeout: float = TimeoutOption) -> None:
    """Add ACLs: every principal x host x operation on the resource."""
    from confluent_kafka.admin import AclBinding

    rtype, name = _resource(topic, group, cluster, transactional_id, delegation_token, True)
    pattern = _pattern(resource_pattern_type, True)
    entries = _entries(allow_principal, deny_principal, allow_host, deny_host)
    if not entries:
        usage("give --allow-principal or --deny-principal")
    bindings = [AclBinding(rtype, name, pattern, p, h, op, perm)
                for p, h, perm in entries for op in _operations(operation, None)]
    with kafka_errors():
        admin = connect_admin(bootstrap, client_config, command_config)
        for binding, future in admin.create_acls(bindings).items():
            result(future, timeout)
            print(f"Added ACL {binding}")


@app.command("list")
def list_acls(topic: str | None = Topic, group: str | None = Group, cluster: bool = Cluster,
              transactional_id: str | None = TxnId, delegation_token: str | None = Token,
              resource_pattern_type: str = typer.Option("any", "--resource-pattern-type",
                                                        metavar="TYPE"),
              principal: str | None = typer.Option(None, "--principal", metavar="TYPE:NAME",
                                                   help="Only this principal's ACLs."),
              fmt: str = FormatOption, bootstrap: str = BootstrapOption,
              client_config: list[str] = ClientConfigOption,
              command_config: Path | None = CommandConfigOption,
              timeout: float = TimeoutOption) -> None:
    """List the ACLs (of one resource, or all). Without Describe on the cluster the node
    answers CLUSTER_AUTHORIZATION_FAILED: an error, not an empty table."""
    from odradek.client.security_admin import describe_acls

    check_format(fmt)
    rtype, name = _resource(topic, group, cluster, transactional_id, delegation_token, False)
    pattern = _pattern(resource_pattern_type, False)
    _, _, rows = native_call(
        bootstrap, "odradek-acl-cli", timeout, client_config, command_config,
        lambda conn: describe_acls(conn, int(rtype.value), name, int(pattern.value), principal))
    emit(HEADER, [_row(r) for r in rows], fmt)


def _row(acl: Any) -> list[Any]:
    """An AclRow as librdkafka's names show it (BROKER for the cluster, as kafka-acls')."""
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    def named(enum: Any, code: int, fallback: str) -> str:
        try:
            return str(enum(code).name)
        except ValueError:
            return fallback
    return [named(ResourceType, acl.resource_type, "DELEGATION_TOKEN"), acl.name,
            named(ResourcePatternType, acl.pattern_type, str(acl.pattern_type)), acl.principal,
            acl.host, named(AclOperation, acl.operation, str(acl.operation)),
            named(AclPermissionType, acl.permission, str(acl.permission))]


@app.command("delete")
def delete(allow_principal: list[str] = AllowPrincipal, deny_principal: list[str] = DenyPrincipal,
           allow_host: list[str] = AllowHost, deny_host: list[str] = DenyHost,
           operation: list[str] = Operation, topic: str | None = Topic,
           group: str | None = Group, cluster: bool = Cluster, transactional_id: str | None = TxnId,
           delegation_token: str | None = Token, resource_pattern_type: str = PatternOpt,
           bootstrap: str = BootstrapOption, client_config: list[str] = ClientConfigOption,
           command_config: Path | None = CommandConfigOption,
           timeout: float = TimeoutOption) -> None:
    """Remove the ACLs matching the options (no principal: every principal's)."""
    from confluent_kafka.admin import AclBindingFilter, AclPermissionType

    rtype, name = _resource(topic, group, cluster, transactional_id, delegation_token, True)
    pattern = _pattern(resource_pattern_type, False)
    entries: list[tuple[str | None, str | None, Any]] = list(
        _entries(allow_principal, deny_principal, allow_host, deny_host))
    if not entries:
        entries = [(None, None, AclPermissionType.ANY)]
    filters = [AclBindingFilter(rtype, name, pattern, p, h, op, perm)
               for p, h, perm in entries for op in _operations(operation, "any")]
    with kafka_errors():
        admin = connect_admin(bootstrap, client_config, command_config)
        for future in admin.delete_acls(filters).values():
            for binding in result(future, timeout):
                print(f"Removed ACL {binding}")
