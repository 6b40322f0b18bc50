"""`odradek pipeline run PATH`: run a pipeline of SQL and Python files on Spark."""

from __future__ import annotations

from pathlib import Path

import typer

# odradek.client.config.BOOTSTRAP_ENV; not imported, as that loads the Kafka client for --help.
BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"

app = typer.Typer(help="Run data pipelines on Spark over odradek topics.", no_args_is_help=True)


def _pairs(values: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint=flag)
        out[key.strip()] = value
    return out


def _client(pairs: list[str], command_config: Path | None) -> dict[str, str]:
    """-X over --command-config, in Kafka's names: the sources and sinks translate them as they
    translate any kafka.* option (and refuse what they cannot honour, naming it)."""
    from odradek.client.security_settings import read_command_config

    out: dict[str, str] = {}
    if command_config is not None:
        try:
            out.update(read_command_config(command_config))
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--command-config") from None
    out.update(_pairs(pairs, "-X"))
    for key in out:
        if key.lower() == "bootstrap.servers":
            raise typer.BadParameter("give the cluster with -b/--bootstrap-server", param_hint="-X")
    return out


@app.command("run")
def run(
    path: Path = typer.Argument(..., help="A directory of *.sql / *.py pipeline files, or one file."),
    master: str = typer.Option("local[2]", "--master", help="Any Spark master URL (local[N], spark://host:port)."),
    bootstrap_server: str | None = typer.Option(
        None, "-b", "--bootstrap-server", envvar=BOOTSTRAP_ENV,
        help="host:port of the broker; the default kafka.bootstrap.servers of every source and flow."),
    checkpoint_dir: Path = typer.Option(Path("checkpoints"), "--checkpoint-dir",
                                        help="Checkpoints go to DIR/<flow name>."),
    available_now: bool = typer.Option(True, "--available-now/--continuous",
                                       help="Process what is there and exit, or run until SIGINT/SIGTERM."),
    trigger_interval: str | None = typer.Option(None, "--trigger-interval",
                                                help="With --continuous: e.g. '5 seconds'."),
    conf: list[str] = typer.Option([], "--conf", help="A Spark setting k=v (repeatable)."),
    var: list[str] = typer.Option([], "--var", help="A pipeline variable name=value, ${name} in SQL "
                                  "(repeatable)."),
    client_config: list[str] = typer.Option(
        [], "-X", "--client-config", metavar="KEY=VALUE", show_default=False,
        help="A Kafka client setting (security.protocol, sasl.jaas.config, ...) for every "
        "source and flow, as its kafka.* option (repeatable)."),
    command_config: Path | None = typer.Option(
        None, "--command-config", metavar="FILE", show_default=False,
        help="A properties file of Kafka client settings (security.protocol, sasl.jaas.config, "
        "ssl.truststore.location, ...), as kafka-*.sh --command-config; -X wins over it."),
    spark_log_level: str = typer.Option(
        "WARN", "--spark-log-level",
        help="Spark's log level (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL); Spark logs go "
        "to stderr, the pipeline's progress to stdout."),
) -> None:
    """Run the pipeline's flows until done (--available-now) or stopped (--continuous).

    Prints one line per micro-batch of each flow: its input rows, rows/s and output rows.
    Client settings (-X, --command-config) become each source's and flow's kafka.* options,
    unless it gives that option itself."""
    from odradek.spark.pipeline.logs import check_level
    from odradek.spark.pipeline.model import PipelineError
    from odradek.spark.pipeline.runner import RunOptions
    from odradek.spark.pipeline.runner import run as run_pipeline

    try:
        level = check_level(spark_log_level)
    except ValueError as e:
        raise typer.BadParameter(str(e), param_hint="--spark-log-level") from None
    client = _client(client_config, command_config)
    opts = RunOptions(master=master, bootstrap=bootstrap_server, checkpoint_dir=checkpoint_dir.resolve(),
                      available_now=available_now, trigger_interval=trigger_interval,
                      conf=_pairs(conf, "--conf"), variables=_pairs(var, "--var"), spark_log_level=level,
                      client=client)
    try:
        # Progress on stdout, failures on stderr with Spark's own log lines.
        code = run_pipeline(path, opts, report=typer.echo, error=lambda msg: typer.echo(msg, err=True))
    except PipelineError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)
