"""The record-batch codec is defined once, in odradek.protocol (issue 13, point 4).

The batch header layout lives in protocol/records.py (BATCH_HEADER, BATCH_PREFIX, the H_*
field indexes, control_marker); the scalar varint and zigzag helpers live in
protocol/primitives.py. These tests read the source text of src/ and bench/ (no imports), so a
copy that creeps back in anywhere fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCANNED = (ROOT / "src", ROOT / "bench")
PROTOCOL = ROOT / "src" / "odradek" / "protocol"

# The magic-2 header format, whole or as any prefix of at least base_offset, batch_length,
# leader_epoch (">qii", the rewritten prefix): a partial copy is still a copy.
_HEADER_FORMAT = re.compile(r"""["']>qii(?:bIhiqqqhii|bIhiqqqhi|bIhiqqqh|bIhiqqq|bIhiqq|bIhiq|bIhi|bIh|bI|b)?["']""")
_VARINT_DEF = re.compile(r"^\s*def\s+(\w*(?:varint|zigzag)\w*)\s*\(", re.IGNORECASE | re.MULTILINE)

# The numpy array codecs of the native client work on whole columns at once, a different
# algorithm from the scalar helpers; they are allowed by name.
_ARRAY_VERSIONS = {
    ("src/odradek/client/batch_builder.py", "_zigzag"),
    ("src/odradek/client/batch_builder.py", "_varint_size"),
    ("src/odradek/client/batch_builder.py", "_put_varints"),
    ("src/odradek/client/batch_builder.py", "_columns_of_varints"),
    ("src/odradek/client/columnar.py", "_varints"),
    ("src/odradek/client/columnar.py", "_column_varint"),
}


def _sources() -> list[Path]:
    return sorted(p for d in SCANNED for p in d.rglob("*.py"))


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def test_batch_header_format_appears_only_in_protocol_records() -> None:
    hits = sorted(
        (_rel(p), m.group(0).strip("'\""))
        for p in _sources()
        for m in _HEADER_FORMAT.finditer(p.read_text(encoding="utf-8"))
    )
    assert hits == [
        ("src/odradek/protocol/records.py", ">qii"),
        ("src/odradek/protocol/records.py", ">qiibIhiqqqhii"),
    ]


def test_varint_and_zigzag_defined_only_in_protocol() -> None:
    outside = sorted(
        (_rel(p), m.group(1))
        for p in _sources()
        if PROTOCOL not in p.parents
        for m in _VARINT_DEF.finditer(p.read_text(encoding="utf-8"))
    )
    assert [hit for hit in outside if hit not in _ARRAY_VERSIONS] == []


def test_protocol_defines_each_scalar_varint_helper_once() -> None:
    defs: dict[str, list[str]] = {}
    for p in sorted(PROTOCOL.rglob("*.py")):
        for m in _VARINT_DEF.finditer(p.read_text(encoding="utf-8")):
            if not m.group(0).startswith((" ", "\t")):  # module level, not Reader/Writer methods
                defs.setdefault(m.group(1), []).append(_rel(p))
    assert defs, "the varint helpers of protocol/primitives.py were not found"
    assert {name: files for name, files in defs.items()
            if files != ["src/odradek/protocol/primitives.py"]} == {}


def test_the_checks_see_a_copy() -> None:
    """The patterns above match the copies this issue removed (so the tests can fail)."""
    assert _HEADER_FORMAT.search('HEADER = struct.Struct(">qiibIhiqq")')
    assert _HEADER_FORMAT.search("_H = struct.Struct('>qiibIhiqqqhii')")
    assert not _HEADER_FORMAT.search('struct.Struct(">qhiqiqiq")')
    assert _VARINT_DEF.search("def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:")
    assert _VARINT_DEF.search("    def _read_varint(buf, pos):")
    assert _VARINT_DEF.search("def zigzag(n):")


def test_control_marker_reads_what_build_control_batch_wrote() -> None:
    from odradek.protocol.records import ControlRecordType, build_control_batch, control_marker

    for ctype, epoch in ((ControlRecordType.COMMIT, 3), (ControlRecordType.ABORT, 0)):
        batch = build_control_batch(ctype, producer_id=7, producer_epoch=1, coordinator_epoch=epoch)
        assert control_marker(batch) == (ctype, epoch)
        assert control_marker(memoryview(batch)) == (ctype, epoch)
        assert control_marker(batch[:63]) == (-1, -1)  # torn inside the record
    assert control_marker(b"\x00" * 61) == (-1, -1)
