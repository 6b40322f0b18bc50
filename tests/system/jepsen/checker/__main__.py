"""Check a kept history again: `python -m tests.system.jepsen.checker HISTORY [--nodes DIR...]`.

Prints the anomaly table; exits 1 when the history (or the nodes' raft state) shows an
anomaly that is not allowed, 0 when valid. `--json FILE` also writes the full report.
A node directory is given as ID=DATA_DIR (e.g. 1=/tmp/run/node1).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..history import load
from . import check, check_raft


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.system.jepsen.checker")
    p.add_argument("history", type=Path)
    p.add_argument("--nodes", nargs="*", default=[], metavar="ID=DIR")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--examples", type=int, default=2)
    args = p.parse_args(argv)
    report = check(load(args.history))
    if args.nodes:
        dirs = {int(i): Path(d) for i, _, d in (n.partition("=") for n in args.nodes)}
        report = report.merge(check_raft(dirs))
    print(report.table(args.examples))
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=1, default=str))
    return 0 if report.valid else 1


if __name__ == "__main__":
    sys.exit(main())
