"""The `odradek` command."""

from __future__ import annotations

from pathlib import Path

import typer

from odradek.cli import acl as acl_cmd
from odradek.cli import bench as bench_cmd
from odradek.cli import cluster as cluster_cmd
from odradek.cli import config as config_cmd
from odradek.cli import connect as connect_cmd
from odradek.cli import console as console_cmd
from odradek.cli import consume as consume_cmd
from odradek.cli import dump_log as dump_log_cmd
from odradek.cli import group as group_cmd
from odradek.cli import partitions as partitions_cmd
from odradek.cli import pipeline as pipeline_cmd
from odradek.cli import produce as produce_cmd
from odradek.cli import quota as quota_cmd
from odradek.cli import registry as registry_cmd
from odradek.cli import storage as storage_cmd
from odradek.cli import topic as topic_cmd
from odradek.cli import transaction as transaction_cmd
from odradek.cli import user as user_cmd

HELP_OPTIONS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

app = typer.Typer(help="odradek: an event streaming platform that speaks the Kafka protocol.",
                  no_args_is_help=True, add_completion=False, context_settings=HELP_OPTIONS,
                  pretty_exceptions_enable=False)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"odradek {version('odradek')}")
        except PackageNotFoundError:  # run from a source tree that is not installed
            print("odradek (version unknown: not installed)")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                 help="Print odradek's version and exit."),
) -> None:
    """odradek: an event streaming platform that speaks the Kafka protocol."""


@app.command()
def serve(
    data_dir: Path = typer.Option(Path("./data"), "--data-dir", metavar="DIR",
                                  help="Where logs and metadata live (created if missing)."),
    config: Path | None = typer.Option(None, "--config", metavar="FILE",
                                        help="A server.properties file."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a config (repeatable)."),
    log_file: Path | None = typer.Option(
        None, "--log-file", metavar="FILE",
        help="Append the node's log to this file instead of stderr. Levels: --set "
             "log.level=DEBUG, or one package: --set log.level.odradek.storage=DEBUG."),
) -> None:
    """Run one node (broker and controller) until SIGTERM or Ctrl-C.

    Beside it run the Schema Registry (schema.registry.listeners, default
    http://127.0.0.1:8081; --set schema.registry.listeners= turns it off) and the web
    console (console.listeners, default http://127.0.0.1:8080; empty turns it off), and a
    Kafka Connect worker when connect.listeners is set (off by default).

    Every config key --set and --config take: `odradek config list --broker`.
    The data directory is locked (<data-dir>/.lock) for as long as the node runs. A start
    that is refused (bad config, directory in use, port taken) prints one line and exits 2.
    """
    from odradek.broker.node import run_node
    from odradek.cli.connect_service import serve_services  # node_services + connect.listeners

    raise typer.Exit(run_node(data_dir=data_dir, config_file=config, overrides=set_,
                              log_file=log_file, services=serve_services))


app.add_typer(topic_cmd.app, name="topic")
app.add_typer(group_cmd.app, name="group")
app.add_typer(bench_cmd.app, name="bench")
app.add_typer(transaction_cmd.app, name="transaction")
app.add_typer(pipeline_cmd.app, name="pipeline")
app.add_typer(storage_cmd.app, name="storage")
app.add_typer(config_cmd.app, name="config")
app.add_typer(registry_cmd.app, name="registry")
app.command("console")(console_cmd.console)
app.add_typer(connect_cmd.app, name="connect")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(partitions_cmd.app, name="partitions")
app.add_typer(acl_cmd.app, name="acl")
app.add_typer(quota_cmd.app, name="quota")
app.add_typer(user_cmd.app, name="user")
app.command("produce")(produce_cmd.produce)
app.command("consume")(consume_cmd.consume)
app.command("dump-log")(dump_log_cmd.dump_log)


if __name__ == "__main__":
    app(prog_name="odradek")
