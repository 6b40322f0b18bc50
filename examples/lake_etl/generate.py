"""Produce the lake_etl example's input: JSON events.

    python -m examples.lake_etl.generate -b HOST:PORT [options]   (--help lists them)
"""

from __future__ import annotations

from examples.lake_etl.generator import main

if __name__ == "__main__":
    main()
