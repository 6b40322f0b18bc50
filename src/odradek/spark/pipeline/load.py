"""Read a pipeline directory (or one file) into a Pipeline, before any Spark work."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from odradek.spark.pipeline.model import Flow, Hook, Pipeline, PipelineError, Source
from odradek.spark.pipeline.options import output_mode, sink_options, source_options
from odradek.spark.pipeline.pyfile import load_python
from odradek.spark.pipeline.sqlfile import load_sql

SUFFIXES = (".sql", ".py")


def pipeline_files(path: Path) -> list[Path]:
    """The .sql and .py files of a directory, by name; names starting with `_` are helpers."""
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise PipelineError(f"{path}: a pipeline file ends in .sql or .py")
        return [path]
    if not path.is_dir():
        raise PipelineError(f"{path}: no such file or directory")
    files = sorted(p for p in path.iterdir()
                   if p.is_file() and p.suffix in SUFFIXES and not p.name.startswith(("_", ".")))
    if not files:
        raise PipelineError(f"{path}: no pipeline files (*.sql, *.py) in this directory")
    return files


def load(path: Path, variables: Mapping[str, str] | None = None) -> Pipeline:
    pipeline = Pipeline()
    for file in pipeline_files(Path(path)):
        if file.suffix == ".sql":
            load_sql(file, pipeline, variables or {})
        else:
            load_python(file, pipeline, variables or {})
    if not any(isinstance(e, Flow | Hook) for e in pipeline.elements):
        raise PipelineError(f"{path}: the pipeline declares no flow (CREATE FLOW ... in SQL, "
                            f"@flow or build(spark, ctx) in Python)")
    check(pipeline)
    return pipeline


def check(pipeline: Pipeline) -> None:
    """Option names and output modes, before a Spark session is started."""
    for el in pipeline.elements:
        if isinstance(el, Source):
            source_options(el.name, el.where, el.options, None)
        elif isinstance(el, Flow):
            sink_options(el.name, el.where, el.options, None)
            output_mode(el.name, el.where, el.output_mode)
