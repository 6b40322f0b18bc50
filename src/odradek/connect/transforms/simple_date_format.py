"""Java's SimpleDateFormat, the part Connect's TimestampConverter uses: a pattern compiled
once, formatting and parsing in UTC (Kafka sets the format's zone to UTC), in the English
names of the JVM's default US locale.

Pattern letters as Java reads them: `y` year (`yy` two digits), `M`/`L` month (one or two
letters a number, three a short name, four or more the full name), `d` day of month, `D` day
of year, `E` day name, `u` day number (1 = Monday), `a` AM/PM, `H` hour 0-23, `k` 1-24, `K`
0-11, `h` 1-12, `m` minute, `s` second, `S` millisecond (a number: `SSSSSS` is the
milliseconds in six digits, not microseconds, as in Java), `z`/`Z`/`X` the zone. Text in
single quotes is literal, `''` a quote. The letters Java knows but this does not (`G` era,
`Y` week year, `w`/`W` weeks, `F` day of week in month) are refused with a ConfigError,
never printed wrongly; another ASCII letter is refused as Java refuses it ("Illegal pattern
character").

Parsing is lenient, as SimpleDateFormat is by default: out-of-range fields roll over (month
13 is January of the next year), text after the pattern's end is ignored, a numeric field
followed directly by another takes exactly its letter count of digits, and `yy` puts a
two-digit year within 80 years before and 20 after now.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SUPPORTED = "yMLdDEuaHkKhmsSzZX"
UNSUPPORTED = "GYwWF"  # Java's letters this translation does not carry
NUMERIC = "ydDuHkKhmsS"  # and M/L with one or two letters


class PatternError(ValueError):
    """A pattern Java would refuse, or one with letters not translated here."""


@dataclass(frozen=True)
class Piece:
    letter: str  # "" for literal text
    count: int = 0
    text: str = ""

    @property
    def numeric(self) -> bool:
        return self.letter in NUMERIC or (self.letter in "ML" and self.count <= 2)


def compile_pattern(pattern: str) -> list[Piece]:
    pieces: list[Piece] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            if pattern.startswith("''", i):
                pieces.append(Piece("", text="'"))
                i += 2
                continue
            end, text = i + 1, []
            while True:
                if end >= len(pattern):
                    raise PatternError(f"Unterminated quote in pattern {pattern}")
                if pattern[end] == "'":
                    if pattern.startswith("''", end):
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            pieces.append(Piece("", text="".join(text)))
            i = end + 1
            continue
        if ("a" <= c <= "z") or ("A" <= c <= "Z"):
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            if c in UNSUPPORTED:
                raise PatternError(f"the pattern letter '{c}' is not supported here (supported: "
                                   f"{', '.join(SUPPORTED)} and quoted text)")
            if c not in SUPPORTED:
                raise PatternError(f"Illegal pattern character '{c}'")
            pieces.append(Piece(c, j - i))
            i = j
            continue
        pieces.append(Piece("", text=c))
        i += 1
    return pieces


# ---- formatting ------------------------------------------------------------------------------
def _pad(number: int, count: int) -> str:
    return f"{'-' if number < 0 else ''}{abs(number):0{count}d}"


def _format_piece(p: Piece, when: dt.datetime) -> str:
    c, n = p.letter, p.count
    if c == "y":
        return _pad(when.year % 100, 2) if n == 2 else _pad(when.year, n)
    if c in "ML":
        if n >= 4:
            return MONTHS[when.month - 1]
        if n == 3:
            return MONTHS[when.month - 1][:3]
        return _pad(when.month, n)
    if c == "E":
        name = DAYS[when.weekday()]
        return name if n >= 4 else name[:3]
    if c == "a":
        return "AM" if when.hour < 12 else "PM"
    if c == "z":
        return "Coordinated Universal Time" if n >= 4 else "UTC"
    if c == "Z":
        return "+0000"
    if c == "X":
        return "Z"
    number = {"d": when.day, "D": when.timetuple().tm_yday, "u": when.isoweekday(),
              "H": when.hour, "k": when.hour or 24, "K": when.hour % 12,
              "h": when.hour % 12 or 12, "m": when.minute, "s": when.second,
              "S": when.microsecond // 1000}[c]
    return _pad(number, n)


def format_millis(pieces: list[Piece], millis: int) -> str:
    """The text for a time in milliseconds since the epoch, in UTC."""
    when = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=millis)
    return "".join(p.text if not p.letter else _format_piece(p, when) for p in pieces)


# ---- parsing ---------------------------------------------------------------------------------
_ZONE = r"(?:Z|UTC|GMT|(?:GMT)?[+-]\d{1,2}(?::?\d{2})?)"
_NAMES = "|".join(sorted({*MONTHS, *(m[:3] for m in MONTHS)}, key=len, reverse=True))
_DAY_NAMES = "|".join(sorted({*DAYS, *(d[:3] for d in DAYS)}, key=len, reverse=True))


def parser(pieces: list[Piece]) -> re.Pattern[str]:
    parts = []
    for i, p in enumerate(pieces):
        if not p.letter:
            parts.append(re.escape(p.text))
            continue
        group = f"(?P<f{i}>"
        if p.numeric:
            abutting = i + 1 < len(pieces) and pieces[i + 1].letter and pieces[i + 1].numeric
            digits = rf"\d{{{p.count}}}" if abutting else r"\d+"
            sign = "-?" if p.letter == "y" and not abutting else ""
            parts.append(f"{group}{sign}{digits})")
        elif p.letter in "ML":
            parts.append(f"{group}{_NAMES})")
        elif p.letter == "E":
            parts.append(f"{group}{_DAY_NAMES})")
        elif p.letter == "a":
            parts.append(f"{group}AM|PM)")
        else:
            parts.append(f"{group}{_ZONE})")
    return re.compile("".join(parts), re.IGNORECASE)


def _offset_minutes(text: str) -> int:
    text = text.upper()
    if text in ("Z", "UTC", "GMT"):
        return 0
    text = text.removeprefix("GMT")
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = (int(digits[:-2]), int(digits[-2:])) if len(digits) > 2 else \
        (int(digits), 0)
    return sign * (hours * 60 + minutes)


def _month_number(text: str) -> int:
    low = text.lower()
    return next(i for i, m in enumerate(MONTHS, 1) if m.lower().startswith(low[:3]))


def parse_millis(pieces: list[Piece], regex: re.Pattern[str], text: str) -> int | None:
    """Milliseconds since the epoch, or None when `text` does not match the pattern."""
    m = regex.match(text)
    if m is None:
        return None
    year, month, day, year_day = 1970, 1, 1, None
    hour, minute, second, milli, pm, offset = 0, 0, 0, 0, False, 0
    twelve = False  # the hour came from K or h, so AM/PM applies
    for i, p in enumerate(pieces):
        if not p.letter:
            continue
        raw = m.group(f"f{i}")
        c = p.letter
        if c == "y":
            year = int(raw)
            if p.count <= 2 and len(raw) == 2 and raw.isdigit():
                year = _two_digit_year(year)
        elif c in "ML":
            month = int(raw) if p.numeric else _month_number(raw)
        elif c == "d":
            day = int(raw)
        elif c == "D":
            year_day = int(raw)
        elif c == "a":
            pm = raw.upper() == "PM"
        elif c in "Hk":
            hour = int(raw) % 24 if c == "k" else int(raw)
        elif c in "Kh":
            hour = int(raw) % 12 if c == "h" else int(raw)
            twelve = True
        elif c == "m":
            minute = int(raw)
        elif c == "s":
            second = int(raw)
        elif c == "S":
            milli = int(raw)
        elif c in "zZX":
            offset = _offset_minutes(raw)
        # E and u name a weekday; with a date given, Java's Calendar ignores them.
    if pm and twelve:
        hour += 12
    # Lenient: months and days roll over through the calendar.
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    if not 1 <= year <= 9999:
        return None
    base = dt.datetime(year, month, 1)
    days = (year_day - 1 - (base - dt.datetime(year, 1, 1)).days) if year_day is not None \
        else day - 1
    try:
        when = base + dt.timedelta(days=days, hours=hour, minutes=minute - offset,
                                   seconds=second, milliseconds=milli)
    except OverflowError:
        return None
    return (when - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)


def _two_digit_year(yy: int) -> int:
    now = dt.datetime.now(dt.UTC)
    start = now.year - 80  # SimpleDateFormat's default century starts 80 years back
    year = start - start % 100 + yy
    return year + 100 if year < start else year


@dataclass
class SimpleDateFormat:
    pattern: str

    def __post_init__(self) -> None:
        self.pieces = compile_pattern(self.pattern)
        self.regex = parser(self.pieces)

    def format(self, millis: int) -> str:
        return format_millis(self.pieces, millis)

    def parse(self, text: str) -> int | None:
        return parse_millis(self.pieces, self.regex, text)
