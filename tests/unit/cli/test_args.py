from __future__ import annotations

import io

import pytest

from odradek.cli.consume import StartOffset, parse_offset
from odradek.cli.produce import parse_headers, read_lines, split_key
from odradek.client import client_config, parse_key_values, resolve_bootstrap


@pytest.mark.parametrize(("text", "expected"), [
    ("oldest", StartOffset("oldest")), ("start", StartOffset("oldest")),
    ("newest", StartOffset("newest")), ("end", StartOffset("newest")),
    ("17", StartOffset("exact", 17)), ("-5", StartOffset("from_end", 5)),
    ("@1700000000000", StartOffset("timestamp", 1700000000000)),
])
def test_parse_offset(text: str, expected: StartOffset) -> None:
    assert parse_offset(text) == expected


@pytest.mark.parametrize("bad", ["", "x", "@x", "1.5"])
def test_parse_offset_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_offset(bad)


def test_read_lines_strips_terminators_only() -> None:
    data = io.BytesIO(b"a\nb \r\n\nlast")
    assert list(read_lines(data)) == [b"a", b"b ", b"", b"last"]


def test_split_key() -> None:
    assert split_key(b"k:v:w", b":") == (b"k", b"v:w")
    assert split_key(b"plain", None) == (None, b"plain")
    assert split_key(b":v", b":") == (b"", b"v")
    with pytest.raises(ValueError):
        split_key(b"novalue", b":")


def test_headers() -> None:
    assert parse_headers(["a=1", "b=x=y", "c="]) == [("a", b"1"), ("b", b"x=y"), ("c", b"")]
    with pytest.raises(ValueError):
        parse_headers(["nokey"])


def test_bootstrap_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ODRADEK_BOOTSTRAP", raising=False)
    assert resolve_bootstrap(None) == "localhost:9092"
    monkeypatch.setenv("ODRADEK_BOOTSTRAP", "h:1")
    assert resolve_bootstrap(None) == "h:1"
    assert resolve_bootstrap("x:2") == "x:2"


def test_client_config() -> None:
    conf = client_config("h:1", {"linger.ms": 9}, linger_ms=5, acks="all")
    conf.pop("logger")
    assert conf == {"bootstrap.servers": "h:1", "linger.ms": 9, "acks": "all"}
    assert parse_key_values(["a=b=c"]) == {"a": "b=c"}
    with pytest.raises(ValueError):
        parse_key_values(["=x"])
