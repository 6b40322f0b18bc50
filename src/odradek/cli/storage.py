"""`odradek storage ...`: commands that read a node's data directory (storage_verify.py prints).

The checks import the storage and metadata code, so they load only when a command runs:
`odradek --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

app = typer.Typer(help="Check a data directory's files.", no_args_is_help=True)


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
