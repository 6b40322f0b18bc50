"""Reading pipeline files: our SQL statements, options, variables; progress lines; no Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.spark.pipeline.load import load
from odradek.spark.pipeline.model import Flow, PipelineError, Source, Statement
from odradek.spark.pipeline.progress import Progress
from odradek.spark.pipeline.sqlfile import parse_options, split_statements


def test_statements_split_on_semicolons_outside_quotes_and_comments() -> None:
    text = "-- a; comment\nSELECT 'a;b' AS x;\n/* c;\n d */ SELECT \"q;\" ;\n\nSELECT 3"
    assert split_statements(text) == [(2, "SELECT 'a;b' AS x"), (4, 'SELECT "q;"'), (6, "SELECT 3")]


def test_options_forms() -> None:
    got = parse_options("(subscribe 'a', kafka.acks = 'all', 'x.y' 'it''s', maxOffsetsPerTrigger 10)", "f:1")
    assert got == {"subscribe": "a", "kafka.acks": "all", "x.y": "it's", "maxOffsetsPerTrigger": "10"}
    with pytest.raises(PipelineError, match="given twice"):
        parse_options("(a '1', a '2')", "f:1")
    with pytest.raises(PipelineError, match="stray comma"):
        parse_options("(a '1',, b '2')", "f:1")


def test_sql_file_declares_sources_views_and_flows(tmp_path: Path) -> None:
    (tmp_path / "p.sql").write_text(
        "CREATE SOURCE s OPTIONS (subscribe '${in}');\n"
        "CREATE TEMPORARY VIEW v AS SELECT value FROM s;\n"
        "CREATE FLOW f AS INSERT INTO TOPIC 'out-1' OPTIONS (outputMode 'update') SELECT value FROM v;\n")
    els = load(tmp_path, {"in": "clicks"}).elements
    assert els[0] == Source("s", {"subscribe": "clicks"}, f"{tmp_path / 'p.sql'}:1")
    assert isinstance(els[1], Statement) and els[1].sql.startswith("CREATE TEMPORARY VIEW v")
    assert isinstance(els[2], Flow) and els[2].options["topic"] == "out-1"
    assert els[2].output_mode == "update" and els[2].sql == "SELECT value FROM v"


@pytest.mark.parametrize(("text", "message"), [
    ("CREATE SOURCE s OPTIONS (subscribe '${nope}');", "unknown variable '${nope}'"),
    ("INSERT INTO TOPIC t SELECT 1;", "needs a flow name"),
    ("CREATE FLOW f AS INSERT INTO TOPIC t;", "a query must follow"),
    ("CREATE SOURCE s (subscribe 't');", "cannot read this statement"),
    ("CREATE SOURCE s OPTIONS (subscribePattern 'x.*');", "declares no flow"),
    ("CREATE SOURCE s OPTIONS (subscribe 't');\nCREATE SOURCE s OPTIONS (subscribe 'u');\n"
     "CREATE FLOW f AS INSERT INTO TOPIC o SELECT value FROM s;", "already declared"),
    ("CREATE SOURCE s OPTIONS (subscribe 't');\n"
     "CREATE FLOW f AS INSERT INTO TOPIC o OPTIONS (outputMode 'upsert') SELECT value FROM s;", "outputMode"),
    ("SELECT 'open;", "unterminated"),
])
def test_bad_sql_files(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "p.sql").write_text(text)
    with pytest.raises(PipelineError, match=message.replace("$", r"\$").replace("{", r"\{").replace("}", r"\}")):
        load(tmp_path)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"CREATE SOURCFLWINOPT(),;'\"=-*/\n${}abc.", "--", "/*", "*/"]),
                max_size=60).map("".join))
def test_fuzz_sql_reader_raises_only_pipeline_errors(text: str) -> None:
    try:
        for line, stmt in split_statements(text):
            assert line >= 1 and stmt
        parse_options(text, "f:1")
    except PipelineError:
        pass


def test_example_directory_declares_in_file_order() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "sql_pipeline"
    els = load(root, {"input": "a", "slow": "b", "stats": "c", "slow_ms": "800"}).elements
    assert [(type(e).__name__, getattr(e, "name", None)) for e in els] == [
        ("Source", "raw_views"), ("Statement", None), ("Flow", "slow_views"), ("Flow", "region_stats")]
    assert els[3].where == f"{root / '20_region_stats.py'}:9"
    assert isinstance(els[3], Flow) and els[3].options == {"outputMode": "update", "topic": "c"}


def test_bad_python_files(tmp_path: Path) -> None:
    (tmp_path / "p.py").write_text("from odradek.spark.pipeline import flow\n\nx = (\n")
    with pytest.raises(PipelineError, match=r"p\.py:3: syntax error"):
        load(tmp_path)
    (tmp_path / "p.py").write_text("from odradek.spark.pipeline import var\n\nvar('missing')\n")
    with pytest.raises(PipelineError, match="unknown variable 'missing'"):
        load(tmp_path)


class _Event:
    """What StreamingQuery.recentProgress holds: an object whose `json` is Spark's progress."""

    def __init__(self, data: dict[str, object]) -> None:
        self.json = json.dumps(data)


class _Query:
    def __init__(self, events: list[dict[str, object]]) -> None:
        self.recentProgress = [_Event(e) for e in events]


def test_progress_lines_one_per_batch() -> None:
    lines: list[str] = []
    progress = Progress(lines.append, {"agg": {0: 5}})
    ran = {"addBatch": 120, "triggerExecution": 300}
    progress.poll("copy", _Query([  # type: ignore[arg-type]
        {"batchId": 0, "numInputRows": 1400, "processedRowsPerSecond": 2301.7,
         "sink": {"numOutputRows": 68}, "durationMs": ran},
        # An idle query repeats its last batch id: not a new batch.
        {"batchId": 0, "numInputRows": 0, "processedRowsPerSecond": 0.0,
         "sink": {"numOutputRows": -1}, "durationMs": {"triggerExecution": 1}},
        # A batch that never reached its sink wrote nothing.
        {"batchId": 1, "numInputRows": 0, "processedRowsPerSecond": "NaN",
         "sink": {"numOutputRows": -1}, "durationMs": {"triggerExecution": 1}}]))
    # foreachBatch sinks report -1: the runner's own count for that batch is used.
    progress.poll("agg", _Query([  # type: ignore[arg-type]
        {"batchId": 0, "numInputRows": 400, "processedRowsPerSecond": 50,
         "sink": {"numOutputRows": -1}, "durationMs": ran},
        {"batchId": 1, "numInputRows": 3, "processedRowsPerSecond": 2,
         "sink": {"numOutputRows": -1}, "durationMs": ran}]))
    assert lines == [
        "flow 'copy': batch 0: 1,400 rows in, 68 rows out, 2,302 rows/s (so far: 1 batch, 1,400 in, 68 out)",
        "flow 'copy': batch 1: 0 rows in, 0 rows out (so far: 2 batches, 1,400 in, 68 out)",
        "flow 'agg': batch 0: 400 rows in, 5 rows out, 50 rows/s (so far: 1 batch, 400 in, 5 out)",
        "flow 'agg': batch 1: 3 rows in, rows out not counted, 2 rows/s "
        "(so far: 2 batches, 403 in, out not counted)"]
    assert progress.summary("copy") == "2 batches, 1,400 rows in, 68 rows out"
    assert progress.summary("agg") == "2 batches, 403 rows in, rows out not counted"


def test_client_settings_become_kafka_options_unless_given() -> None:
    """`pipeline run -X/--command-config`: every source and flow gets them as kafka.* options;
    an element's own kafka.* option wins (the option names compare case-insensitively)."""
    from odradek.spark.pipeline.options import sink_options, source_options

    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"}
    got = source_options("s", "f:1", {"subscribe": "t", "kafka.SASL.mechanism": "PLAIN"}, "h:1",
                         client)
    assert got == {"subscribe": "t", "kafka.SASL.mechanism": "PLAIN",
                   "kafka.bootstrap.servers": "h:1", "kafka.security.protocol": "SASL_SSL"}
    assert sink_options("f", "f:2", {"topic": "o", "outputMode": "append"}, None, client) == {
        "topic": "o", "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512"}
