"""Java .properties syntax, as server.properties and meta.properties are read."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.metadata.config.java_properties import parse_properties


def test_parse_properties():
    text = (
        "# a comment\n"
        "! another comment \\\n"
        "node.id=1\n"
        "  listeners = PLAINTEXT://localhost:9092\n"
        "log.dirs: /tmp/a\n"
        "num.partitions 3\n"
        "key\\ with\\=escapes=va\\tl\\u0041\n"
        "multi=one,\\\n"
        "      two,\\\n"
        "   three\n"
        "empty=\n"
        "\r\n"
        "colon\\:key=x\n"
        "trailing.backslash=a\\\\\n"
    )
    props = parse_properties(text)
    assert props == {
        "node.id": "1",
        "listeners": "PLAINTEXT://localhost:9092",
        "log.dirs": "/tmp/a",
        "num.partitions": "3",
        "key with=escapes": "va\tlA",
        "multi": "one,two,three",
        "empty": "",
        "colon:key": "x",
        "trailing.backslash": "a\\",
    }


def test_parse_properties_bad_unicode_escape():
    with pytest.raises(ValueError):
        parse_properties("a=\\u12\n")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab=: \\\n\r\t#!u0", max_size=60))
def test_properties_parser_never_crashes(text):
    try:
        props = parse_properties(text)
    except ValueError:
        return
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())
