"""`odradek storage verify --data-dir D`: run the checks and print what they found.

The checks live below the command line: storage/verify.py reads every log of the directory
(batches, CRCs, indexes, checkpoints, strays), metadata/log_verify.py adds the metadata log's
own (its records, its commit marker). Here, only the printing: one line per finding, `DAMAGE`
(a file fails its checks) or `NOTE` (nothing is wrong, but an operator may want to know), and
a summary. The exit code is 1 when any damage is found, else 0.
"""

from __future__ import annotations

from pathlib import Path

from odradek.metadata.log_verify import verify_data_dir


def run(data_dir: Path) -> int:
    """Verify `data_dir`, print the report; the exit code."""
    report = verify_data_dir(data_dir)
    for line in report.damage:
        print(f"DAMAGE {line}")
    for line in report.notes:
        print(f"NOTE {line}")
    print(f"checked {report.logs} logs, {report.segments} segments, {report.batches} batches: "
          f"{len(report.damage)} damaged, {len(report.notes)} notes")
    return 1 if report.damage else 0
