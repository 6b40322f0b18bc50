from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.storage.checkpoints import CheckpointError, read_offsets, write_offsets


def test_round_trip_and_format(tmp_path: Path) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    write_offsets(path, {("b.t", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb.t 1 7\n"
    assert read_offsets(path) == {("a", 0): 42, ("b.t", 1): 7}
    assert not (tmp_path / "recovery-point-offset-checkpoint.tmp").exists()
    assert read_offsets(tmp_path / "absent") == {}


@pytest.mark.parametrize(
    "text", ["", "1\n0\n", "0\n2\na 0 1\n", "0\n1\na 0\n", "0\n1\na x 1\n", "zero\n0\n", "\xff"]
)
def test_malformed_files_raise(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(CheckpointError):
        read_offsets(path)


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True), st.integers(0, 10_000)),
        st.integers(0, 2**63 - 1),
        max_size=20,
    )
)
def test_round_trip_property(tmp_path_factory, offsets: dict[tuple[str, int], int]) -> None:
    path = tmp_path_factory.mktemp("cp") / "cp"
    write_offsets(path, offsets)
    assert read_offsets(path) == offsets
