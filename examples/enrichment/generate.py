"""Produce the enrichment example's input: user profiles (a compacted topic, created if missing) and user actions.

    python -m examples.enrichment.generate -b HOST:PORT [options]   (--help lists them)
"""

from __future__ import annotations

from examples.enrichment.generator import main

if __name__ == "__main__":
    main()
