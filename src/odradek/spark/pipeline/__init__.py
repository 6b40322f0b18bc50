"""`odradek pipeline run PATH`: pipelines of SQL and Python files over odradek topics.

In a pipeline's Python file: `from odradek.spark.pipeline import source, view, flow, var`.
The file format is described in docs/pipelines.md.
"""

from __future__ import annotations

from odradek.spark.pipeline.declare import flow, source, var, view
from odradek.spark.pipeline.model import PipelineError

__all__ = ["PipelineError", "flow", "source", "var", "view"]
