"""`odradek storage ...`: a node's data directory: format it, check it (storage_verify.py prints).

The checks import the storage and metadata code, so they load only when a command runs:
`odradek --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(help="Format or check a data directory.", no_args_is_help=True)


@app.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id (a random Kafka Uuid), for `odradek storage format`."""
    from odradek.metadata.meta_properties import random_kafka_uuid, uuid_to_base64

    print(uuid_to_base64(random_kafka_uuid()))


@app.command("format")
def format_(
    cluster_id: str = typer.Option(..., "--cluster-id", "-t", metavar="ID",
                                   help="The cluster id (`odradek storage random-uuid`)."),
    data_dir: Path | None = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="The directory to format (default: log.dirs of the config, else ./data)."),
    config: Path | None = typer.Option(None, "--config", "-c", metavar="FILE",
                                        help="The node's server.properties."),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="Override a config (repeatable), as `odradek serve`."),
    ignore_formatted: bool = typer.Option(
        False, "--ignore-formatted", "-g",
        help="A directory already formatted for this cluster and node is not an error."),
    add_scram: list[str] = typer.Option(
        [], "--add-scram", "-S", metavar="CREDENTIAL",
        help="A SCRAM user the cluster starts with (repeatable), as kafka-storage.sh: "
             "'SCRAM-SHA-512=[name=admin,password=admin-secret]'."),
) -> None:
    """Write meta.properties and the bootstrap metadata, as kafka-storage.sh format does.

    The node id comes from the config (node.id). A directory that belongs to another cluster
    or node is refused. A node with controller.quorum.voters set starts only from a
    formatted directory; a single node without a quorum formats itself.
    """
    from odradek.broker.config import ConfigError, check_config
    from odradek.broker.server_properties import load_config
    from odradek.metadata.bootstrap import BOOTSTRAP_FEATURES, FormatError, format_data_dir

    try:
        node_config = load_config(config, set_)
        check_config(node_config)
    except ConfigError as exc:
        print(f"Error: invalid configuration: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    from odradek.security.scram_credentials import parse_add_scram

    try:
        scram = [parse_add_scram(arg) for arg in add_scram]
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if data_dir is None:
        dirs = node_config.log_dirs if node_config.is_set("log.dirs") else []
        data_dir = Path(dirs[0].split(",")[0]) if dirs else Path("./data")
    try:
        done = format_data_dir(data_dir, cluster_id, node_config.node_id,
                               ignore_formatted=ignore_formatted, extra_records=scram)
    except FormatError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise typer.Exit(1) from None
    if not done.created:
        print(f"All of the log directories are already formatted ({data_dir}).")
        return
    levels = ", ".join(f"{name} {level}" for name, level in BOOTSTRAP_FEATURES)
    print(f"Formatting metadata directory {data_dir} for node {done.meta.node_id} of cluster "
          f"{done.meta.cluster_id} with {levels}.")


@app.command("verify")
def verify(
    data_dir: Path = typer.Option(..., "--data-dir", metavar="DIR",
                                  help="The node's data directory."),
) -> None:
    """Check every batch's CRC, the indexes and the checkpoints of every log (read-only)."""
    if not data_dir.is_dir():
        print(f"Error: {data_dir}: not a directory", file=sys.stderr)
        raise typer.Exit(2)
    from odradek.cli.storage_verify import run

    raise typer.Exit(run(data_dir))
