"""Transforms that change a record's topic or drop it (TimestampRouter, RegexRouter,
Filter), and Kafka's predicates (TopicNameMatches, HasHeaderKey, RecordIsTombstone).

Java's patterns are translated: RegexRouter's `$1` group references, and TimestampRouter's
SimpleDateFormat letters (yyyy, yy, MM, dd, HH, mm, ss, SSS, 'literal'), in UTC as Kafka
formats them. A pattern letter not here is refused at configuration, not printed wrongly.
"""

from __future__ import annotations

import datetime as dt
import re

from odradek.connect.data import ConnectRecord, DataError
from odradek.connect.transforms.base import ConfigError, Setting, Transformation


def _regex_check(raw: str) -> str | None:
    try:
        re.compile(raw)
    except re.error as exc:
        return f"Invalid regex: {exc}"
    return None


def java_replacement(text: str) -> str:
    """Matcher.replaceFirst's `$1`/`${name}` and `\\$` -> Python's re.sub template."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append("\\\\" if text[i + 1] == "\\" else text[i + 1])
            i += 2
        elif c == "$":
            m = re.match(r"\$(\d+)|\$\{(\w+)\}", text[i:])
            if m is None:
                raise ConfigError(f"Invalid value {text} for configuration replacement: "
                                  "Illegal group reference")
            out.append(f"\\g<{m.group(1) or m.group(2)}>")
            i += len(m.group(0))
        else:
            out.append("\\\\" if c == "\\" else c)
            i += 1
    return "".join(out)


class RegexRouter(Transformation):
    """A topic that matches `regex` (the whole name) becomes `replacement`."""

    settings = (Setting("regex", None, _regex_check), Setting("replacement", None))

    def configure(self) -> None:
        self.regex = re.compile(self.config["regex"])
        self.template = java_replacement(self.config["replacement"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.regex.fullmatch(record.topic) is None:
            return record
        topic = self.regex.sub(self.template, record.topic, count=1)
        return record.new(topic=topic)


_DATE_LETTERS = {"yyyy": "%Y", "yy": "%y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M",
                 "ss": "%S"}


def simple_date_format(pattern: str) -> list[str]:
    """SimpleDateFormat's pattern -> pieces: strftime codes, `SSS`, and literal text."""
    pieces: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ConfigError(f"Invalid value {pattern} for configuration "
                                  "timestamp.format: Unterminated quote")
            pieces.append(pattern[i + 1:end].replace("%", "%%") if end > i + 1 else "'")
            i = end + 1
            continue
        if c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            run = pattern[i:j]
            if run == "SSS":
                pieces.append("\0SSS")
            elif run in _DATE_LETTERS:
                pieces.append(_DATE_LETTERS[run])
            else:
                raise ConfigError(f"Invalid value {pattern} for configuration "
                                  f"timestamp.format: the pattern letters {run!r} are not "
                                  "supported here (yyyy, yy, MM, dd, HH, mm, ss, SSS)")
            i = j
            continue
        pieces.append("%%" if c == "%" else c)
        i += 1
    return pieces


class TimestampRouter(Transformation):
    """`topic.format` with ${topic} and ${timestamp} (the record's timestamp, formatted)."""

    settings = (Setting("topic.format", "${topic}-${timestamp}"),
                Setting("timestamp.format", "yyyyMMdd"))

    def configure(self) -> None:
        self.format = self.config["topic.format"]
        self.pieces = simple_date_format(self.config["timestamp.format"])

    def formatted(self, millis: int) -> str:
        when = dt.datetime.fromtimestamp(millis / 1000, tz=dt.UTC)
        return "".join(f"{when.microsecond // 1000:03d}" if p == "\0SSS" else when.strftime(p)
                       for p in self.pieces)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.timestamp is None:
            raise DataError(f"Timestamp missing on record: {record}")
        topic = self.format.replace("${topic}", record.topic).replace(
            "${timestamp}", self.formatted(record.timestamp))
        return record.new(topic=topic)


class Filter(Transformation):
    """Drops every record it is applied to: with a predicate, those the predicate picks."""

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        return None


# ---- predicates ------------------------------------------------------------------------------
class Predicate:
    settings: tuple[Setting, ...] = ()

    def __init__(self, config: dict[str, str]) -> None:
        self.config: dict[str, str] = {}
        for s in self.settings:
            raw = config.get(s.name, s.default)
            if raw is None:
                raise ConfigError(f'Missing required configuration "{s.name}" which has no '
                                  "default value.")
            if s.check is not None and (message := s.check(raw)):
                raise ConfigError(f"Invalid value {raw} for configuration {s.name}: {message}")
            self.config[s.name] = raw
        self.configure()

    def configure(self) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        raise NotImplementedError


class TopicNameMatches(Predicate):
    settings = (Setting("pattern", None, lambda raw: _regex_check(raw) if raw else
                        "String must be non-empty"),)

    def configure(self) -> None:
        self.pattern = re.compile(self.config["pattern"])

    def test(self, record: ConnectRecord) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate):
    settings = (Setting("name", None, lambda raw: None if raw else "String must be non-empty"),)

    def test(self, record: ConnectRecord) -> bool:
        return record.header(self.config["name"])


class RecordIsTombstone(Predicate):
    def test(self, record: ConnectRecord) -> bool:
        return record.value is None
