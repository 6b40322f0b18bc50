"""The node's log: where it goes (stderr or --log-file), how much (log.level configs) and in
what shape (log.format).

`log.level` is the root level; `log.level.<logger>` sets one package's level, e.g.
`log.level.odradek.storage=DEBUG`. Names are log4j's, as Kafka's broker loggers use them.
One event is one line in both formats: `text` (time, level, logger, message; a traceback
folded onto the same line) for people, `json` (one object per line: time, level, logger,
message, and exc for a traceback) for log shippers.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from odradek.metadata.config.broker_configs import LOG_LEVEL_PREFIX, BrokerConfig

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TRACE = 5  # below DEBUG: log4j's TRACE

_LEVELS = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}


def log_levels(config: BrokerConfig) -> dict[str, int]:
    """Logger name ('' for the root) -> level, from log.level and log.level.<logger>."""
    levels = {"": _LEVELS[(config.get_str("log.level") or "INFO").strip().upper()]}
    for key, value in config.values.items():
        if key.startswith(LOG_LEVEL_PREFIX) and len(key) > len(LOG_LEVEL_PREFIX):
            # the config table has checked the value already
            levels[key[len(LOG_LEVEL_PREFIX):]] = _LEVELS[value.strip().upper()]
    return levels


class OneLineFormatter(logging.Formatter):
    """The text format with every event on one line: newlines in a message or a traceback
    become ` | `, so a line-based reader (grep, a shipper without multiline rules) sees
    whole events."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace("\n", " | ")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC, ms), level, logger, message, and exc
    (the traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        event = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            event["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            event["stack"] = record.stack_info
        return json.dumps(event, ensure_ascii=False)


def formatter_for(fmt: str) -> logging.Formatter:
    """log.format: 'text' (the default) or 'json'; the config table checked the value."""
    return JsonFormatter() if fmt.strip().lower() == "json" else OneLineFormatter()


def setup_logging(levels: dict[str, int] | None = None, log_file: Path | None = None,
                  fmt: str = "text") -> None:
    """Send the log to stderr or to `log_file` (appended), at the given levels, as `fmt`.

    Raises OSError when the log file cannot be opened: the caller refuses to start.
    """
    logging.addLevelName(TRACE, "TRACE")
    root = logging.getLogger()
    handler: logging.Handler
    if log_file is not None:
        handler = logging.FileHandler(log_file, mode="a", encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter_for(fmt))
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    levels = levels or {"": logging.INFO}
    for name, level in levels.items():
        logging.getLogger(name or None).setLevel(level)


def logs_to_stderr() -> bool:
    """Whether the log already reaches stderr (a refusal is then not printed twice)."""
    return any(type(h) is logging.StreamHandler and getattr(h, "stream", None) is sys.stderr
               for h in logging.getLogger().handlers)
