"""`odradek pipeline run PATH`: pipelines of SQL and Python files over odradek topics. In a
pipeline's Python file: `from odradek.spark.pipeline import source, view, flow, var` (from
`declare`). `load` reads a directory into a `model.Pipeline` (files via `sqlfile`, `pyfile`),
`runner.run` starts its flows on Spark and `progress` prints per-flow lines. The file format is
described in docs/pipelines.md."""

from __future__ import annotations

from odradek.spark.pipeline.declare import flow, source, var, view
from odradek.spark.pipeline.model import PipelineError

__all__ = ["PipelineError", "flow", "source", "var", "view"]
