"""Produce the cdc_postgres example's input: change events of the customers table.

    python -m examples.cdc_postgres.generate -b HOST:PORT [options]   (--help lists them)
"""

from __future__ import annotations

from examples.cdc_postgres.generator import main

if __name__ == "__main__":
    main()
