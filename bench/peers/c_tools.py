"""The C programs of bench/c: where `make bench-tools` puts them (built against Debian's
librdkafka-dev), and the same programs linked against confluent-kafka's bundled librdkafka."""

from __future__ import annotations

import subprocess
from pathlib import Path

C_DIR = Path(__file__).resolve().parents[1] / "c"
CONSUME_TOOL = C_DIR / "rdkafka_consume"
PRODUCE_TOOL = C_DIR / "rdkafka_produce"


def bundled_tool(tool: Path = CONSUME_TOOL) -> Path:
    """`tool` (a bench/c program: the consumer unless told) linked against the librdkafka
    confluent-kafka's wheel bundles (2.16, which has fetch.queue.backoff.ms) as
    `<tool>_bundled`, built on first use with Debian's headers (2.0.2: every function the
    programs call has the same C signature in both). It shows the C client with exactly the
    settings and library the Python clients have."""
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).resolve().parents[1] / "confluent_kafka.libs"
    so = next(libs.glob("librdkafka*.so*"))
    src = tool.with_name(tool.name + ".c")
    out = tool.with_name(tool.name + "_bundled")
    newest = max(src.stat().st_mtime, (C_DIR / "common.h").stat().st_mtime)
    if not out.exists() or out.stat().st_mtime < newest:
        subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-o", str(out), str(src),
                        f"-L{libs}", f"-l:{so.name}", f"-Wl,-rpath,{libs}"], check=True)
    return out
