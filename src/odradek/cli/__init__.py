"""The `odradek` command. Importing the package sets up how its help reads (helpstyle)."""

from odradek.cli import helpstyle

helpstyle.install()
