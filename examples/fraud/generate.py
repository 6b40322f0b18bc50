"""Produce the fraud example's input: orders (JSON) and payments (Avro).

    python -m examples.fraud.generate -b HOST:PORT [options]   (--help lists them)
"""

from __future__ import annotations

from examples.fraud.generator import main

if __name__ == "__main__":
    main()
