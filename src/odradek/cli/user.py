"""`odradek user create|list|delete`: SCRAM credentials (AlterUserScramCredentials through
confluent-kafka's admin client; DescribeUserScramCredentials through odradek's native client,
as confluent-kafka crashed on a refused one).

The password is salted and hashed on this side (the admin client sends salt and
SaltedPassword); it is read from a prompt, --password-file or --password, in that order of
preference: a password on the command line is visible to other users of the machine.
"""

from __future__ import annotations

from pathlib import Path

import typer

from odradek.cli.common import (
    BootstrapOption,
    ClientConfigOption,
    CommandConfigOption,
    TimeoutOption,
    admin,
    fail,
    kafka_errors,
    native_call,
    result,
    usage,
)

app = typer.Typer(help="SCRAM users: create, list, delete.", no_args_is_help=True)

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


def _mechanism(name: str) -> object:
    from confluent_kafka.admin import ScramMechanism

    name = name.upper()
    if name not in MECHANISMS:
        usage(f"--mechanism must be one of {', '.join(MECHANISMS)}, got {name}")
    return ScramMechanism[name.replace("-", "_")]


@app.command("create")
def create(
    name: str = typer.Argument(..., help="The user name (its principal is User:NAME)."),
    mechanism: list[str] = typer.Option(["SCRAM-SHA-512"], "--mechanism", "-m",
                                        help="SCRAM-SHA-256 or SCRAM-SHA-512 (repeatable)."),
    iterations: int = typer.Option(4096, "--iterations", help="4096 to 16384."),
    password: str | None = typer.Option(None, "--password", help="Visible in `ps`: prefer "
                                        "the prompt or --password-file."),
    password_file: Path | None = typer.Option(None, "--password-file", metavar="FILE",
                                              help="A file whose first line is the password."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Create a user's SCRAM credential, or replace its password."""
    from confluent_kafka.admin import ScramCredentialInfo, UserScramCredentialUpsertion

    if password_file is not None:
        try:
            password = password_file.read_text().splitlines()[0]
        except (OSError, IndexError):
            usage(f"--password-file {password_file}: cannot read a password from it")
    if password is None:
        password = typer.prompt(f"Password for {name}", hide_input=True,
                                confirmation_prompt=True)
    if not password:
        usage("the password must not be empty")
    alterations = [UserScramCredentialUpsertion(name, ScramCredentialInfo(_mechanism(m),
                                                                          iterations),
                                                password.encode())
                   for m in mechanism]
    with kafka_errors():
        client = admin(bootstrap, client_config, command_config)
        futures = client.alter_user_scram_credentials(alterations)
        for user, future in futures.items():
            result(future, timeout)
            print(f"Created SCRAM credential ({', '.join(m.upper() for m in mechanism)}) "
                  f"for user {user}.")


@app.command("list")
def list_(
    names: list[str] = typer.Argument(None, help="Users to show (default: all)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """List users and their SCRAM mechanisms and iterations (never keys)."""
    described = _describe(bootstrap, names or None, client_config, command_config, timeout)
    if not described:
        print("No SCRAM users.")
        return
    print(f"{'USER':<24} MECHANISMS")
    for user, infos in sorted(described.items()):
        mechs = ", ".join(f"{_MECHANISM_NAMES.get(m, m)} (iterations={i})" for m, i in infos)
        print(f"{user:<24} {mechs}")


_MECHANISM_NAMES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}  # Kafka's ScramMechanism codes


def _describe(bootstrap: str, names: list[str] | None, client_config: list[str],
              command_config: Path | None, timeout: float) -> dict[str, list[tuple[int, int]]]:
    """user -> [(mechanism code, iterations)]; the node's refusal (or an unknown user) is an
    error naming its code."""
    from odradek.client.connection import error_name
    from odradek.client.security_admin import describe_scram_users

    _, _, results = native_call(bootstrap, "odradek-user-cli", timeout, client_config,
                                command_config, lambda conn: describe_scram_users(conn, names))
    out = {}
    for user, user_code, user_message, infos in results:
        if user_code:
            fail(f"user {user}: {error_name(user_code)}: {user_message or ''}".rstrip(": "))
        out[user] = infos
    return out


@app.command("delete")
def delete(
    name: str = typer.Argument(..., help="The user."),
    mechanism: list[str] = typer.Option(list(MECHANISMS), "--mechanism", "-m",
                                        help="Which credentials (default: both)."),
    bootstrap: str = BootstrapOption,
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    timeout: float = TimeoutOption,
) -> None:
    """Delete a user's SCRAM credentials (those it has among --mechanism)."""
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    infos = _describe(bootstrap, [name], client_config, command_config, timeout).get(name, [])
    wanted = {m.upper() for m in mechanism}
    have = [ScramMechanism[_MECHANISM_NAMES[m].replace("-", "_")] for m, _ in infos
            if _MECHANISM_NAMES.get(m) in wanted]
    if not have:
        fail(f"user {name} has no credential for {', '.join(sorted(wanted))}")
    with kafka_errors():
        client = admin(bootstrap, client_config, command_config)
        futures = client.alter_user_scram_credentials(
            [UserScramCredentialDeletion(name, m) for m in have])
        for user, f in futures.items():
            result(f, timeout)
            print(f"Deleted SCRAM credential(s) of user {user}.")
