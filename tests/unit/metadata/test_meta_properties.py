from __future__ import annotations

import pytest

from odradek.metadata.meta_properties import (
    META_PROPERTIES,
    MetaPropertiesError,
    ensure_meta_properties,
    random_kafka_uuid,
    read_meta_properties,
    uuid_from_base64,
    uuid_to_base64,
)


def test_first_start_formats_and_later_starts_keep_identity(tmp_path):
    assert read_meta_properties(tmp_path) is None
    first = ensure_meta_properties(tmp_path, node_id=1)
    assert len(first.cluster_id) == 22
    assert first.directory_id is not None and len(first.directory_id) == 22
    text = (tmp_path / META_PROPERTIES).read_text()
    assert "version=1" in text
    assert f"cluster.id={first.cluster_id}" in text
    assert "node.id=1" in text
    again = ensure_meta_properties(tmp_path, node_id=1)
    assert again == first
    assert read_meta_properties(tmp_path) == first


def test_other_node_id_is_refused(tmp_path):
    ensure_meta_properties(tmp_path, node_id=1)
    with pytest.raises(MetaPropertiesError):
        ensure_meta_properties(tmp_path, node_id=2)


def test_kafka_written_file_is_read(tmp_path):
    (tmp_path / META_PROPERTIES).write_text(
        "#\n#Tue Jan 02 10:00:00 UTC 2024\nnode.id=5\n"
        "directory.id=qPDCmJ6cQJ-_Ri11sLqHGg\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
    )
    props = read_meta_properties(tmp_path)
    assert props is not None
    assert (props.node_id, props.cluster_id) == (5, "MkU3OEVBNTcwNTJENDM2Qg")


def test_bad_file_is_refused(tmp_path):
    (tmp_path / META_PROPERTIES).write_text("version=0\ncluster.id=x\nnode.id=1\n")
    with pytest.raises(MetaPropertiesError):
        read_meta_properties(tmp_path)


def test_uuid_base64_round_trip():
    for _ in range(50):
        value = random_kafka_uuid()
        text = uuid_to_base64(value)
        assert len(text) == 22 and not text.startswith("-")
        assert uuid_from_base64(text) == value
