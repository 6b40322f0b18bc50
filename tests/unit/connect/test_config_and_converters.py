"""Issue 19: connector config validation (Connect's per-field answer), the converters' bytes,
and FileStreamSource's line reader, with no process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.connect import converters
from odradek.connect.catalog import default_plugins
from odradek.connect.connectors.file_lines import read_lines
from odradek.connect.server import worker_config

PLUGINS = default_plugins()


def errors_of(config: dict[str, str]) -> dict[str, list[str]]:
    return {k: v for k, v in PLUGINS.validate(config).errors().items() if v}


def test_plugins_are_found_by_kafkas_names() -> None:
    for name in ("org.apache.kafka.connect.file.FileStreamSourceConnector",
                 "FileStreamSourceConnector", "FileStreamSource"):
        plugin = PLUGINS.find(name)
        assert plugin is not None and plugin.type == "source"
    assert PLUGINS.find("FileStreamSink").type == "sink"  # type: ignore[union-attr]
    assert PLUGINS.find("Nope") is None


def test_validation_errors_per_field() -> None:
    ok = {"name": "s", "connector.class": "FileStreamSource", "file": "/f", "topic": "t"}
    assert errors_of(ok) == {}
    assert errors_of({**ok, "topic": "a,b"}) == {"topic": [
        "'topic' in FileStreamSourceConnector configuration requires definition of a single "
        "topic."]}
    assert errors_of({**ok, "batch.size": "x"}) == {"batch.size": [
        "Invalid value x for configuration batch.size: Not a number of type INT"]}
    assert errors_of({**ok, "transforms": "a"}) == {"transforms.a.type": [
        'Missing required configuration "transforms.a.type" which has no default value.']}
    assert errors_of({**ok, "value.converter": "io.confluent.AvroConverter"}) == {
        "value.converter": ["Invalid value io.confluent.AvroConverter for configuration "
                            "value.converter: Class io.confluent.AvroConverter could not be "
                            "found."]}
    assert errors_of({**ok, "key.converter": converters.AVRO}) == {"key.converter": [
        'key.converter: Missing required configuration "schema.registry.url" which has no '
        "default value."]}
    assert errors_of({**ok, "key.converter": converters.AVRO,
                      "key.converter.schema.registry.url": "http://r:8081"}) == {}
    sink = {"name": "k", "connector.class": "FileStreamSink", "file": "/f"}
    assert errors_of({**sink, "topics": "a", "topics.regex": "a.*"})["topics"] == [
        "topics and topics.regex are mutually exclusive options, but both are set."]
    assert errors_of({**sink, "topics.regex": "("})["topics.regex"][0].startswith(
        "Invalid value ( for configuration topics.regex")
    lake = {"name": "l", "connector.class": "odradek.connect.lake.LakeSinkConnector",
            "topics": "t", "path": "/p"}
    assert errors_of(lake) == {}
    assert errors_of({**lake, "format": "delta"}) == {}
    assert errors_of({**lake, "format": "orc"})["format"] == [
        "Invalid value orc for configuration format: String must be one of: parquet, delta"]
    assert "partition.by" in errors_of({**lake, "partition.by": "nope"})


def test_validation_body_shape() -> None:
    body = PLUGINS.validate({"connector.class": "FileStreamSource", "name": "x",
                             "file": "/f"}).body()
    assert body["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert body["error_count"] == 1 and body["groups"][0] == "Common"
    entry = next(c for c in body["configs"] if c["definition"]["name"] == "tasks.max")
    assert entry["definition"]["default_value"] == "1" and entry["definition"]["type"] == "INT"
    assert entry["value"] == {"name": "tasks.max", "value": "1", "recommended_values": [],
                              "errors": [], "visible": True}
    unknown = PLUGINS.validate({"connector.class": "Nope", "name": "x"})
    assert unknown.errors()["connector.class"][0].startswith(
        "Failed to find any class that implements Connector and which name matches Nope")
    assert unknown.message().startswith("Connector configuration is invalid and contains the "
                                        "following 1 error(s):\nconnector.class: ")


def test_converters_fast_path() -> None:
    json_schemas = converters.resolve("value.converter", {})
    assert json_schemas.from_text("a\"b") == (
        b'{"schema":{"type":"string","optional":false},"payload":"a\\"b"}')
    assert json_schemas.to_connect("t", json_schemas.from_text("x"))[1] == "x"
    assert converters.text_of({"a": 1}) == '{"a":1}' and converters.text_of(None) == "null"
    with pytest.raises(ValueError, match="could not be found"):
        converters.resolve("value.converter", {"value.converter": "x.Y"})


@given(st.text())
def test_json_converter_round_trips_any_text(text: str) -> None:
    for schemas in (True, False):
        conv = converters.JsonConverter(schemas)
        raw = conv.from_text(text)
        assert raw is not None and conv.to_connect("t", raw)[1] == text
        json.loads(raw)


def test_worker_settings_refused_or_defaulted() -> None:
    config = worker_config({"group.id": "g"})
    assert config["config.storage.topic"] == "connect-configs"
    assert config["offset.storage.partitions"] == "25"
    with pytest.raises(ValueError, match="exactly-once"):
        worker_config({"exactly.once.source.support": "enabled"})
    with pytest.raises(ValueError, match=r"schema\.registry\.url"):
        worker_config({"value.converter": "io.confluent.connect.avro.AvroConverter"})
    with pytest.raises(ValueError, match="could not be found"):
        worker_config({"value.converter": "com.example.Nope"})


def test_file_lines_read_whole_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    assert read_lines(str(path), 0, 10) == ([], 0)  # no file yet: nothing, same position
    path.write_bytes(b"one\r\ntwo\nthr")
    lines, pos = read_lines(str(path), 0, 10)
    assert lines == [("one", 5), ("two", 9)] and pos == 9
    assert read_lines(str(path), 0, 1) == ([("one", 5)], 5)  # batch.size
    assert read_lines(str(path), 0, 10, until=5) == ([("one", 5)], 5)
    with path.open("ab") as out:
        out.write(b"ee\n")
    assert read_lines(str(path), pos, 10) == ([("three", 15)], 15)


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\r\n",
                                               blacklist_categories=("Cs",))), max_size=20),
       st.integers(1, 5))
def test_file_lines_in_batches_see_every_line_once(tmp_path_factory: pytest.TempPathFactory,
                                                    texts: list[str], batch: int) -> None:
    path = tmp_path_factory.mktemp("lines") / "f.txt"
    path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    seen: list[str] = []
    pos = 0
    while True:
        lines, pos = read_lines(str(path), pos, batch)
        if not lines:
            break
        seen += [text for text, _ in lines]
    assert seen == texts and pos == path.stat().st_size
