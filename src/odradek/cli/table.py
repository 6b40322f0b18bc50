"""The one way listings are printed: an aligned table, or JSON with `--format json`.

Tables look like rpk's and kafka-consumer-groups': upper-case headers, columns padded
with two spaces, no trailing blanks, `-` for a missing or empty value. JSON is one array of
objects whose keys are the headers in lower case with `_` for `-` (`LOG-END-OFFSET` ->
`log_end_offset`), holding numbers as numbers and a missing value as null.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import typer

TEXT = "text"
JSON = "json"
FORMATS = (TEXT, JSON)

FormatOption = typer.Option(TEXT, "--format", metavar="text|json",
                            help="Output as an aligned table (text) or as JSON (json).")


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        from odradek.cli.common import usage

        usage(f"--format must be text or json, not {fmt!r}")
    return fmt


def json_key(header: str) -> str:
    return header.strip("#").lower().replace("-", "_").replace(" ", "_").replace("(", "") \
        .replace(")", "") or "count"


def render_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    data = [list(header)] + [["-" if v is None or v == "" else str(v) for v in row]
                             for row in rows]
    widths = [max(len(r[i]) for r in data) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip()
                     for r in data)


def records(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    keys = [json_key(h) for h in header]
    return [dict(zip(keys, row, strict=True)) for row in rows]


def emit(header: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = TEXT,
         extra: dict[str, Any] | None = None) -> None:
    """Print a listing. With `extra` (summary fields), JSON becomes an object holding the
    rows under "rows" next to those fields; the text table is printed alone."""
    if fmt == JSON:
        rows_json = records(header, rows)
        print(json.dumps(rows_json if extra is None else {**extra, "rows": rows_json},
                         indent=2))
        return
    print(render_table(header, rows))
