"""Python pipeline files: imported once, declaring through odradek.spark.pipeline."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path

from pyspark import cloudpickle

from odradek.spark.pipeline.declare import loading
from odradek.spark.pipeline.model import Hook, Pipeline, PipelineError

_ids = itertools.count()


def load_python(path: Path, pipeline: Pipeline, variables: Mapping[str, str]) -> None:
    name = f"odradek_pipeline_{''.join(c if c.isalnum() else '_' for c in path.stem)}_{next(_ids)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The module is not importable by name on executors: ship its functions by value.
    cloudpickle.register_pickle_by_value(module)
    with loading(pipeline, variables, str(path)):
        try:
            spec.loader.exec_module(module)
        except PipelineError:
            raise
        except SyntaxError as e:
            raise PipelineError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
        except Exception as e:
            line = _line_in(path, e)
            raise PipelineError(f"{path}{line}: {type(e).__name__}: {e}") from None
    build = getattr(module, "build", None)
    if callable(build):
        pipeline.add(Hook(f"{path.stem}.build", str(path), build))


def _line_in(path: Path, exc: BaseException) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename) == path:
            return f":{frame.lineno}"
    return ""
