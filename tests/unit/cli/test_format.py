from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.cli.format import ConsumedRecord, FormatError, compile_format, json_line, unescape

REC = ConsumedRecord(topic="clicks", partition=3, offset=42, timestamp=1700000000123,
                     key=b"user-1", value=b"hello world",
                     headers=[("trace", b"abc"), ("empty", None)])


def render(fmt: str, rec: ConsumedRecord = REC) -> bytes:
    return compile_format(fmt).render(rec)


def test_every_field() -> None:
    assert render("%t %p %o %d %k=%v\\n") == b"clicks 3 42 1700000000123 user-1=hello world\n"


def test_lengths() -> None:
    assert render("%T %K %V %H") == b"6 6 11 2"


def test_null_key_and_value_render_empty_with_length_minus_one() -> None:
    rec = ConsumedRecord("t", 0, 0, 0, None, None)
    assert render("[%k][%v] %K %V", rec) == b"[][] -1 -1"


def test_headers_default_and_template() -> None:
    assert render("%h") == b"trace=abc,empty="
    assert render("%h{%k:%v;}") == b"trace:abc;empty:;"
    assert render("%h{<%K/%V>}") == b"<5/3><5/-1>"


def test_escapes_and_percent() -> None:
    assert render("%v\\t100%%\\r\\n") == b"hello world\t100%\r\n"
    assert render("\\x41\\xff") == b"A\xff"
    assert render("a\\\\b") == b"a\\b"


def test_binary_values_are_written_as_stored() -> None:
    rec = ConsumedRecord("t", 0, 0, 0, b"\x00\xfe", b"\xff\x01")
    assert render("%k%v", rec) == b"\x00\xfe\xff\x01"


@pytest.mark.parametrize("bad", ["%", "%q", "\\", "\\q", "\\x4", "%h{%k", "%h{%t}"])
def test_malformed_formats_are_refused(bad: str) -> None:
    with pytest.raises(FormatError):
        compile_format(bad)


def test_unescape() -> None:
    assert unescape("a\\tb\\n") == "a\tb\n"
    assert unescape("plain") == "plain"


def test_json_line() -> None:
    line = json_line(REC)
    assert line.endswith(b"\n")
    assert json.loads(line) == {
        "topic": "clicks", "key": "user-1", "value": "hello world",
        "headers": [{"key": "trace", "value": "abc"}, {"key": "empty", "value": None}],
        "partition": 3, "offset": 42, "timestamp": 1700000000123,
    }
    assert list(json.loads(line)) == ["topic", "key", "value", "headers", "partition", "offset",
                                      "timestamp"]


def test_json_line_null_and_non_utf8() -> None:
    rec = ConsumedRecord("t", 0, 7, 1, None, b"\xffok")
    obj = json.loads(json_line(rec))
    assert obj["key"] is None
    assert obj["value"] == "\ufffdok"
    assert obj["headers"] == []


printable = st.text(alphabet=st.characters(blacklist_characters="%\\", blacklist_categories=("Cs",)))


@settings(max_examples=50)
@given(literal=printable, key=st.binary(max_size=20), value=st.binary(max_size=20))
def test_literals_pass_through_and_fields_substitute(literal: str, key: bytes, value: bytes) -> None:
    rec = ConsumedRecord("t", 1, 2, 3, key, value)
    assert render(literal + "%k|%v", rec) == literal.encode() + key + b"|" + value


@settings(max_examples=100)
@given(st.text(max_size=20))
def test_compile_never_crashes_with_anything_but_format_error(fmt: str) -> None:
    try:
        renderer = compile_format(fmt)
    except FormatError:
        return
    assert isinstance(renderer.render(REC), bytes)
