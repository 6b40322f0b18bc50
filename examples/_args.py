"""The command-line options every example generator shares, named as the `odradek` CLI names them."""

from __future__ import annotations

import argparse
import os
import sys

BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"  # as odradek.client.config.BOOTSTRAP_ENV
DEFAULT_BOOTSTRAP = "localhost:9092"


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and every option's default."""


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser with `-b/--bootstrap-server` (default: $ODRADEK_BOOTSTRAP, else localhost:9092)."""
    lines = (doc or "").strip().splitlines()
    ap = argparse.ArgumentParser(prog=_prog(), description=lines[0] if lines else None,
                                 epilog="\n".join(lines[1:]).strip() or None,
                                 formatter_class=_Formatter)
    ap.add_argument("-b", "--bootstrap-server", dest="bootstrap",
                    default=os.environ.get(BOOTSTRAP_ENV) or DEFAULT_BOOTSTRAP,
                    metavar="HOST:PORT",
                    help=f"a node to produce to (env {BOOTSTRAP_ENV})")
    # The generators' earlier spelling, still accepted so old notes keep working.
    ap.add_argument("--bootstrap", dest="bootstrap", help=argparse.SUPPRESS)
    return ap


def _prog() -> str | None:
    """`python -m examples.x.generate` rather than `__main__.py` in usage lines."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return f"python -m {name.removesuffix('.__main__')}" if name else None
