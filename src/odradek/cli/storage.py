"""`odradek storage ...`: commands that read a node's data directory (storage_verify.py does the work).

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
    from odradek.cli.storage_verify import verify_data_dir

    report = verify_data_dir(data_dir)
    for line in report.damage:
        print(f"DAMAGE {line}")
    for line in report.notes:
        print(f"NOTE {line}")
    print(f"checked {report.logs} logs, {report.segments} segments, {report.batches} batches: "
          f"{len(report.damage)} damaged, {len(report.notes)} notes")
    raise typer.Exit(1 if report.damage else 0)
