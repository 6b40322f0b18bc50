"""The `odradek` command (typer): `main.app` with `serve` and one module per command group:
`topic`, `produce`, `consume` (with `format`), `group`, `transaction`, `config`, `bench`,
`pipeline`, `dump_log`, `storage` (checks in `storage_verify`). Shared pieces: `common`
(bootstrap option, Kafka error reporting), `reach` (is the node there), `table` (listings as a
table or JSON). Importing the package sets up how its help reads (helpstyle)."""

from odradek.cli import helpstyle

helpstyle.install()
