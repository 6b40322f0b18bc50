"""`odradek registry`: run the Schema Registry beside any odradek or Kafka cluster."""

from __future__ import annotations

import typer

app = typer.Typer(help="The Schema Registry (Confluent's REST API), kept in the _schemas topic.",
                  no_args_is_help=True)


@app.command("serve")
def serve(
    bootstrap: str | None = typer.Option(None, "--bootstrap-server", "-b",
                                         help="The cluster to keep _schemas in."),
    listeners: str = typer.Option("http://127.0.0.1:8081", "--listeners",
                                  help="Comma-separated http://host:port to serve on."),
    topic: str = typer.Option("_schemas", "--topic", help="The compacted topic (kafkastore.topic)."),
    leader_eligibility: bool = typer.Option(
        True, "--leader-eligibility/--no-leader-eligibility",
        help="May this instance be elected the writer (leader.eligibility)? Followers forward "
             "writes to the leader."),
) -> None:
    """Serve the registry until SIGTERM or Ctrl-C (it reads _schemas to the end first)."""
    import logging

    from odradek.client import resolve_bootstrap
    from odradek.registry.server import parse_listener, run

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        for item in listeners.split(","):
            parse_listener(item)
    except ValueError as exc:
        typer.echo(f"odradek registry serve: {exc}", err=True)
        raise typer.Exit(2) from None
    raise typer.Exit(run(resolve_bootstrap(bootstrap), listeners, topic, leader_eligibility))
