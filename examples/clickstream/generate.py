"""Produce the clickstream example's input: page views.

    python -m examples.clickstream.generate -b HOST:PORT [options]   (--help lists them)
"""

from __future__ import annotations

from examples.clickstream.generator import main

if __name__ == "__main__":
    main()
