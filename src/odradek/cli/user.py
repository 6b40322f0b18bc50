"""`odradek user create|list|delete`: SCRAM credentials (AlterUserScramCredentials and
DescribeUserScramCredentials through confluent-kafka's admin client).

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
    with kafka_errors():
        client = admin(bootstrap, client_config, command_config)
        future = client.describe_user_scram_credentials(names or None)
        if isinstance(future, dict):
            described = {user: result(f, timeout) for user, f in future.items()}
        else:
            described = result(future, timeout)
    if not described:
        print("No SCRAM users.")
        return
    print(f"{'USER':<24} MECHANISMS")
    for user, desc in sorted(described.items()):
        mechs = ", ".join(f"{info.mechanism.name.replace('_', '-')} "
                          f"(iterations={info.iterations})"
                          for info in desc.scram_credential_infos)
        print(f"{user:<24} {mechs}")


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
    from confluent_kafka.admin import UserScramCredentialDeletion

    with kafka_errors():
        client = admin(bootstrap, client_config, command_config)
        described = client.describe_user_scram_credentials([name])
        future = described[name] if isinstance(described, dict) else described
        try:
            desc = result(future, timeout)
            if isinstance(desc, dict):
                desc = desc[name]
        except Exception as exc:  # RESOURCE_NOT_FOUND: no such user
            fail(f"user {name}: {exc}")
        wanted = {m.upper() for m in mechanism}
        have = [info.mechanism for info in desc.scram_credential_infos
                if info.mechanism.name.replace("_", "-") in wanted]
        if not have:
            fail(f"user {name} has no credential for {', '.join(sorted(wanted))}")
        futures = client.alter_user_scram_credentials(
            [UserScramCredentialDeletion(name, m) for m in have])
        for user, f in futures.items():
            result(f, timeout)
            print(f"Deleted SCRAM credential(s) of user {user}.")
