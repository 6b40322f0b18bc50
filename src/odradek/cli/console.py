"""`odradek console`: the web console alone, against any cluster (`odradek serve` runs the
same beside its node on console.listeners)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import typer

from odradek.cli.common import ClientConfigOption, CommandConfigOption, client_overrides


def _default_history() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "odradek" / "console-lag-history.sqlite3"


def _bind(listener: str) -> socket.socket:
    """Bind a listener now, so a port in use is refused with a message before anything runs."""
    from odradek.console.server import parse_listener

    host, port = parse_listener(listener)
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(
            host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ValueError(f"host {host!r} not resolved ({exc.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ValueError(f"cannot serve the console on {listener}: {exc.strerror or exc}") \
            from None
    return sock


def console(
    bootstrap: str | None = typer.Option(None, "--bootstrap-server", "-b", metavar="HOST:PORT",
                                         help="The cluster to show."),
    listeners: str = typer.Option("http://127.0.0.1:8080", "--listeners", metavar="URLS",
                                  help="Comma-separated http://host:port to serve on."),
    registry: str | None = typer.Option(None, "--registry", metavar="URL",
                                        help="A Schema Registry: decode Avro, JSON and "
                                             "Protobuf records; the Schemas page."),
    admin: str | None = typer.Option(None, "--admin", metavar="URL",
                                     help="A node's admin HTTP (admin.listeners): fenced "
                                          "brokers, the controller quorum, disk use."),
    history: Path = typer.Option(None, "--history", metavar="FILE",
                                 help="Where the sampled consumer lag is kept (SQLite), so "
                                      "the lag charts survive a restart. Default: "
                                      "$XDG_STATE_HOME/odradek/console-lag-history.sqlite3."),
    sample_interval: float = typer.Option(5.0, "--sample-interval", metavar="SECONDS",
                                          help="How often every group's lag is sampled."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    inherit_fds: str = typer.Option("", "--inherit-fds", hidden=True,
                                    help="Listening sockets bound by `odradek serve`, one per "
                                         "listener, in order."),
) -> None:
    """Serve the web console until SIGTERM or Ctrl-C: overview, topics, messages, consumer
    groups with their lag over time, schemas, ACLs and SCRAM users.

    It logs in with the client settings given (-X security.protocol=SASL_PLAINTEXT -X
    sasl.mechanism=SCRAM-SHA-256 -X sasl.username=... -X sasl.password=..., or a
    --command-config file) and acts with that principal's ACLs."""
    import logging

    from odradek.client import resolve_bootstrap
    from odradek.console.server import parse_listener, run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if not sample_interval > 0:
        typer.echo("odradek console: --sample-interval must be above 0", err=True)
        raise typer.Exit(2)
    overrides = client_overrides(client_config, command_config)
    items = [item for item in listeners.split(",") if item.strip()]
    fds = [int(fd) for fd in inherit_fds.split(",") if fd.strip()]
    held = []
    try:
        if not items:
            raise ValueError("--listeners is empty: give at least one http://host:port")
        for item in items:
            parse_listener(item)
        for url in (registry, admin):
            if url is not None and not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r} is not an http:// or https:// URL")
        if not fds:
            held = [_bind(item) for item in items]
            fds = [s.fileno() for s in held]
    except ValueError as exc:
        for s in held:
            s.close()
        typer.echo(f"odradek console: {exc}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(run(resolve_bootstrap(bootstrap), ",".join(items),
                         history or _default_history(), registry, admin, fds=fds,
                         sample_interval_s=sample_interval, overrides=overrides))
