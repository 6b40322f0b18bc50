"""Rendering consumed records: rpk-style `--format` strings and the default JSON lines.

Escapes in a format string: `\\n \\t \\r \\\\ \\xNN`. Percent fields:

    %t topic        %T topic length
    %k key          %K key length (-1 for a null key)
    %v value        %V value length (-1 for a null value)
    %p partition    %o offset        %d timestamp (ms)
    %h headers as k=v joined by ","; `%h{TEMPLATE}` renders each header with TEMPLATE,
       where %k/%v/%K/%V are the header's key, value and their lengths
    %H header count %% a percent sign

The renderer works on bytes: keys and values are written as stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["ConsumedRecord", "FormatError", "Renderer", "compile_format", "json_line",
           "unescape"]


class FormatError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)


Part = Callable[[ConsumedRecord], bytes]
HeaderPart = Callable[[str, bytes | None], bytes]

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}


def unescape(text: str) -> str:
    """Backslash escapes as a shell user means them: `\\t` is a tab, `\\x1f` a unit separator."""
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):
            raise FormatError("format ends with a lone backslash")
        nxt = text[i + 1]
        if nxt in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[nxt])
            i += 2
        elif nxt == "x":
            digits = text[i + 2 : i + 4]
            if len(digits) != 2 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise FormatError(f"bad \\x escape at position {i}: needs two hex digits")
            byte = int(digits, 16)
            # Above 0x7f a \x escape means that raw byte, not a code point: carry it as a
            # surrogate escape so encoding with "surrogateescape" gives the byte back.
            out.append(chr(byte) if byte < 0x80 else chr(0xDC00 + byte))
            i += 4
        else:
            raise FormatError(f"unknown escape \\{nxt} at position {i}")
    return "".join(out)


def _length(data: bytes | None) -> bytes:
    return b"-1" if data is None else str(len(data)).encode()


def _bytes(data: bytes | None) -> bytes:
    return b"" if data is None else data


_RECORD_FIELDS: dict[str, Part] = {
    "t": lambda r: r.topic.encode(),
    "T": lambda r: str(len(r.topic.encode())).encode(),
    "k": lambda r: _bytes(r.key),
    "K": lambda r: _length(r.key),
    "v": lambda r: _bytes(r.value),
    "V": lambda r: _length(r.value),
    "p": lambda r: str(r.partition).encode(),
    "o": lambda r: str(r.offset).encode(),
    "d": lambda r: str(r.timestamp).encode(),
    "H": lambda r: str(len(r.headers)).encode(),
}

_HEADER_FIELDS: dict[str, HeaderPart] = {
    "k": lambda k, v: k.encode(),
    "K": lambda k, v: str(len(k.encode())).encode(),
    "v": lambda k, v: _bytes(v),
    "V": lambda k, v: _length(v),
}


def _literal(data: bytes) -> Callable[..., bytes]:
    return lambda *_: data


def _compile(text: str, fields: dict[str, Callable[..., bytes]], allow_headers: bool,
             ) -> list[Callable[..., bytes]]:
    parts: list[Callable[..., bytes]] = []
    literal: list[str] = []
    i = 0

    def flush_literal() -> None:
        if literal:
            parts.append(_literal("".join(literal).encode("utf-8", "surrogateescape")))
            literal.clear()

    while i < len(text):
        ch = text[i]
        if ch != "%":
            literal.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):
            raise FormatError("format ends with a lone %")
        verb = text[i + 1]
        i += 2
        if verb == "%":
            literal.append("%")
            continue
        flush_literal()
        if verb == "h" and allow_headers:
            template: list[HeaderPart] | None = None
            if i < len(text) and text[i] == "{":
                close = _matching_brace(text, i)
                template = _compile(text[i + 1 : close], _HEADER_FIELDS, allow_headers=False)
                i = close + 1
            parts.append(_headers_part(template))
        elif verb in fields:
            parts.append(fields[verb])
        else:
            raise FormatError(f"unknown format field %{verb}")
    flush_literal()
    return parts


def _matching_brace(text: str, start: int) -> int:
    depth = 0
    for j in range(start, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    raise FormatError(f"unclosed {{ at position {start}")


def _headers_part(template: list[HeaderPart] | None) -> Part:
    if template is None:
        def render_default(r: ConsumedRecord) -> bytes:
            return b",".join(k.encode() + b"=" + _bytes(v) for k, v in r.headers)
        return render_default

    def render_each(r: ConsumedRecord) -> bytes:
        return b"".join(part(k, v) for k, v in r.headers for part in template)
    return render_each


class Renderer:
    """A compiled format: `render(record) -> bytes`."""

    def __init__(self, parts: list[Part]) -> None:
        self._parts = parts
        # Called once per consumed record: for one or two parts (`%v\n`) a call or one
        # concatenation, not a generator per record (a fifth of `odradek consume`, by py-spy).
        if len(parts) == 1:
            self.render = parts[0]  # type: ignore[method-assign]
        elif len(parts) == 2:
            first, second = parts
            self.render = lambda record: first(record) + second(record)  # type: ignore[method-assign]

    def render(self, record: ConsumedRecord) -> bytes:
        return b"".join(part(record) for part in self._parts)


def compile_format(fmt: str) -> Renderer:
    """Compile a `--format` string (escapes first, then % fields); FormatError if malformed."""
    return Renderer(_compile(unescape(fmt), _RECORD_FIELDS, allow_headers=True))


def _text(data: bytes | None) -> str | None:
    # JSON carries text; bytes that are not UTF-8 are shown with U+FFFD, as rpk does.
    return None if data is None else data.decode("utf-8", "replace")


def json_line(record: ConsumedRecord) -> bytes:
    """The default output: one JSON object per record, then a newline."""
    obj = {
        "topic": record.topic,
        "key": _text(record.key),
        "value": _text(record.value),
        "headers": [{"key": k, "value": _text(v)} for k, v in record.headers],
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
    }
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"
