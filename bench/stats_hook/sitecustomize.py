"""librdkafka's statistics from every confluent-kafka consumer of a process, unchanged code.

bench/consumer_bounds.py starts the consumers it studies with this directory first on
PYTHONPATH and ODRADEK_STATS_DIR set; Python imports this module at start-up (also in Spark's
Python workers, which inherit PYTHONPATH), and every `confluent_kafka.Consumer` made afterwards
gets a `stats_cb` that appends each statistics JSON (every ODRADEK_STATS_MS, default 100 ms)
as one line to ODRADEK_STATS_DIR/<pid>-<n>.jsonl. The consumer's own settings are kept; the
callback runs inside its consume() calls, as any application's would. Without
ODRADEK_STATS_DIR this module does nothing.
"""

from __future__ import annotations

import itertools
import os

_DIR = os.environ.get("ODRADEK_STATS_DIR")

if _DIR:
    import confluent_kafka

    _Base = confluent_kafka.Consumer
    _seq = itertools.count()

    class _StatsConsumer(_Base):  # type: ignore[misc,valid-type]
        def __init__(self, conf: dict[str, object], *args: object, **kwargs: object) -> None:
            conf = dict(conf)
            if "stats_cb" not in conf:
                path = os.path.join(_DIR, f"{os.getpid()}-{next(_seq)}.jsonl")
                sink = open(path, "a", buffering=1)  # noqa: SIM115 - line-buffered, lives with it

                def on_stats(js: str) -> None:
                    sink.write(js.replace("\n", " ") + "\n")

                conf["stats_cb"] = on_stats
                conf.setdefault("statistics.interval.ms",
                                int(os.environ.get("ODRADEK_STATS_MS", "100")))
            super().__init__(conf, *args, **kwargs)

    confluent_kafka.Consumer = _StatsConsumer  # type: ignore[misc]
