"""`odradek quota set|describe`: client quotas (kafka-configs --entity-type users/clients).

An entity is `--user NAME` or `--user-default`, `--client-id ID` or `--client-default`, or
one of each. `set` takes `--add key=value` and `--delete key` (repeatable) with the keys
producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate.
Sent with AlterClientQuotas / DescribeClientQuotas by odradek's native client, which logs in
with -X / --command-config (TLS with PEM files; SASL PLAIN, SCRAM-SHA-256/512).
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
    native_call,
    usage,
)
from odradek.cli.table import FormatOption, check_format, emit

app = typer.Typer(help="Set and describe client quotas.", no_args_is_help=True)

User = typer.Option(None, "--user", metavar="NAME", help="A user (the principal's name).")
UserDefault = typer.Option(False, "--user-default", help="The default of every user.")
Client = typer.Option(None, "--client-id", metavar="ID", help="A client id.")
ClientDefault = typer.Option(False, "--client-default", help="The default of every client id.")


def _entity(user: str | None, user_default: bool, client: str | None,
            client_default: bool, required: bool) -> list[tuple[str, str | None]]:
    if user is not None and user_default:
        usage("give --user or --user-default, not both")
    if client is not None and client_default:
        usage("give --client-id or --client-default, not both")
    out: list[tuple[str, str | None]] = []
    if user is not None or user_default:
        out.append(("user", user))
    if client is not None or client_default:
        out.append(("client-id", client))
    if required and not out:
        usage("name an entity: --user/--user-default and/or --client-id/--client-default")
    return out


def _call(bootstrap: str, client_config: list[str], command_config: Path | None,
          timeout: float, call: Any) -> Any:
    return native_call(bootstrap, "odradek-quota-cli", timeout, client_config, command_config,
                       call)


@app.command("set")
def set_quota(user: str | None = User, user_default: bool = UserDefault,
              client_id: str | None = Client, client_default: bool = ClientDefault,
              add: list[str] = typer.Option([], "--add", metavar="KEY=VALUE",
                                            help="Set a quota (repeatable)."),
              delete: list[str] = typer.Option([], "--delete", metavar="KEY",
                                               help="Remove a quota (repeatable)."),
              bootstrap: str = BootstrapOption, client_config: list[str] = ClientConfigOption,
              command_config: Path | None = CommandConfigOption,
              timeout: float = TimeoutOption) -> None:
    """Set or remove quotas of one entity."""
    from odradek.client.quotas import alter_client_quotas

    entity = _entity(user, user_default, client_id, client_default, True)
    ops: list[tuple[str, float, bool]] = []
    for item in add:
        key, sep, value = item.partition("=")
        if not sep:
            usage(f"--add takes key=value, got {item!r}")
        try:
            ops.append((key.strip(), float(value), False))
        except ValueError:
            usage(f"quota {key} needs a number, got {value!r}")
    ops += [(key.strip(), 0.0, True) for key in delete]
    if not ops:
        usage("give --add key=value or --delete key")
    _call(bootstrap, client_config, command_config, timeout,
          lambda conn: alter_client_quotas(conn, [(entity, ops)])[0])
    print(f"Quotas of {_label(entity)} updated")


def _label(entity: list[tuple[str, str | None]]) -> str:
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


@app.command("describe")
def describe(user: str | None = User, user_default: bool = UserDefault,
             client_id: str | None = Client, client_default: bool = ClientDefault,
             fmt: str = FormatOption, bootstrap: str = BootstrapOption,
             client_config: list[str] = ClientConfigOption,
             command_config: Path | None = CommandConfigOption,
             timeout: float = TimeoutOption) -> None:
    """List quotas (of the matching entities, or all)."""
    from odradek.client.quotas import describe_client_quotas

    check_format(fmt)
    entity = _entity(user, user_default, client_id, client_default, False)
    components = [(t, 1 if n is None else 0, n) for t, n in entity]
    _, _, entries = _call(bootstrap, client_config, command_config, timeout,
                          lambda conn: describe_client_quotas(conn, components))
    rows = []
    for ent, values in entries:
        names = dict(ent)
        for key, value in sorted(values.items()):
            rows.append([_name(names, "user"), _name(names, "client-id"), key,
                         int(value) if value == int(value) else value])
    emit(["USER", "CLIENT_ID", "QUOTA", "VALUE"], rows, fmt)


def _name(names: dict[str, str | None], kind: str) -> str:
    if kind not in names:
        return ""
    return "<default>" if names[kind] is None else str(names[kind])
