"""Java .properties syntax: what Kafka's server.properties and meta.properties are written in.

Comments (`#`, `!`), `key=value`, `key: value` and `key value`, backslash line continuations,
and the escapes `\\t \\n \\r \\f \\uXXXX`, as java.util.Properties.load reads them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["parse_properties"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WS = " \t\f"


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java properties syntax (what Kafka's server.properties uses) into a dict."""
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key)] = _unescape(value)
    return result


def _logical_lines(text: str) -> Iterable[str]:
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue  # a comment line never continues, even when it ends in a backslash
        parts = []
        while _ends_with_continuation(line):
            parts.append(line[:-1])
            if i >= len(natural):
                line = ""
                break
            line = natural[i].lstrip(_WS)
            i += 1
        parts.append(line)
        yield "".join(parts)


def _ends_with_continuation(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WS:
            break
        i += 1
    key = line[:i]
    rest = line[i:]
    rest = rest.lstrip(_WS)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WS)
    return key, rest


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):
            i += 1  # a lone trailing backslash (end of input) is dropped, as Java does
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"Malformed \\uxxxx encoding in properties: {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
