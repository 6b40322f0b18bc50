"""`odradek connect`: run a Kafka Connect worker whose connectors are Spark queries.

    odradek connect serve -b localhost:9092 --listeners http://127.0.0.1:8083 [--master URL]
    odradek connect list|status|create|config|pause|resume|stop|restart|delete|offsets|plugins

The worker's settings are Kafka's (`group.id`, `config.storage.topic`, ...): from a
`connect-distributed.properties`-style file (`--config`) and `--set key=value`. The REST API
is Kafka Connect's (see docs/connect.md).
"""

from __future__ import annotations

from pathlib import Path

import typer

from odradek.cli.common import ClientConfigOption, CommandConfigOption
from odradek.cli.connect_client import register

app = typer.Typer(help="Kafka Connect: connectors as Spark Structured Streaming queries.",
                  no_args_is_help=True)


@app.command("serve")
def serve(
    bootstrap: str | None = typer.Option(None, "--bootstrap-server", "-b", metavar="HOST:PORT",
                                         help="The cluster to keep Connect's topics in."),
    listeners: str = typer.Option("http://127.0.0.1:8083", "--listeners", metavar="URLS",
                                  help="Comma-separated http://host:port to serve the REST "
                                       "API on (the first is this worker's id)."),
    master: str = typer.Option("local[2]", "--master", metavar="URL",
                               help="The Spark master the connectors' queries run on."),
    config: Path | None = typer.Option(None, "--config", metavar="FILE", exists=True,
                                       dir_okay=False,
                                       help="Worker properties (connect-distributed.properties)."),
    settings: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                       help="A worker setting; overrides --config. Repeatable."),
    state_dir: Path | None = typer.Option(None, "--state-dir", metavar="DIR",
                                          help="Where the queries' scratch checkpoints go "
                                               "(default: a temporary directory)."),
    client_config: list[str] = ClientConfigOption,
    command_config: Path | None = CommandConfigOption,
    inherit_fds: str = typer.Option("", "--inherit-fds", hidden=True,
                                    help="Listening sockets bound by `odradek serve`, one per "
                                         "listener, in order."),
) -> None:
    """Serve the Connect REST API and run connectors until SIGTERM or Ctrl-C.

    -X and --command-config (Kafka's client settings: security.protocol, sasl.jaas.config,
    ssl.truststore.location, ...) go to every client the worker makes: its topics, its group
    membership, the sinks' consumer groups and every connector's Spark query."""
    import logging

    from odradek.cli.common import client_overrides
    from odradek.client import parse_key_values, resolve_bootstrap
    from odradek.connect.cluster import Cluster
    from odradek.connect.server import parse_listener, read_properties, run, worker_config

    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    overrides = read_properties(config) if config else {}
    try:
        overrides.update(parse_key_values(settings))
        for item in listeners.split(","):
            parse_listener(item)
        worker_config(overrides)
        client = {k: str(v) for k, v in client_overrides(client_config, command_config).items()}
        Cluster("", client).native_security()  # the group's connection must honour them
    except ValueError as exc:
        typer.echo(f"odradek connect serve: {exc}", err=True)
        raise typer.Exit(2) from None

    def session():  # type: ignore[no-untyped-def]
        # Imported here: the layering keeps odradek.spark out of odradek.connect; the CLI
        # hands the worker a session with the `odradek` data source registered.
        from odradek.spark import session as spark_session

        # (its Python processes start through odradek-spark-python and get the session's
        # connect-back timeout, session.PYTHON_WORKERS)
        spark = spark_session(master, "odradek-connect", {"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("WARN")
        return spark

    if state_dir is not None:
        state_dir.mkdir(parents=True, exist_ok=True)
    fds = [int(fd) for fd in inherit_fds.split(",") if fd.strip()]
    raise typer.Exit(run(resolve_bootstrap(bootstrap), session, listeners, overrides,
                         state_dir, client, fds))


register(app)  # the client commands: list, status, create, ... (connect_client)

