"""The Python side of a pipeline file: `source`, `view`, `flow` and `var`.

A pipeline's .py file is imported once; these calls record what it declares into the
pipeline being loaded. Decorated functions take the SparkSession and return a
(streaming) DataFrame; the runner calls them after every file is loaded.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from odradek.spark.pipeline.model import Flow, Pipeline, PipelineError, Source, View

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class _Loading:
    pipeline: Pipeline
    variables: Mapping[str, str]
    path: str


_CURRENT: ContextVar[_Loading | None] = ContextVar("odradek_pipeline_loading", default=None)


@contextmanager
def loading(pipeline: Pipeline, variables: Mapping[str, str], path: str) -> Iterator[None]:
    token = _CURRENT.set(_Loading(pipeline, variables, path))
    try:
        yield
    finally:
        _CURRENT.reset(token)


def _current(what: str) -> _Loading:
    cur = _CURRENT.get()
    if cur is None:
        raise PipelineError(f"{what}() declares into a pipeline: call it at the top level of a "
                            f"pipeline file run by `odradek pipeline run`")
    return cur


def _where(cur: _Loading) -> str:
    """`file:line` of the pipeline file's statement that is declaring (a few frames up)."""
    target = os.path.realpath(cur.path)
    frame = sys._getframe(1)
    for _ in range(8):
        if frame is None:
            break
        if os.path.realpath(frame.f_code.co_filename) == target:
            return f"{cur.path}:{frame.f_lineno}"
        frame = frame.f_back
    return cur.path


def var(name: str, default: str | None = None) -> str:
    """A pipeline variable (`--var name=value`), or `default` when it is not set."""
    cur = _current("var")
    if name in cur.variables:
        return cur.variables[name]
    if default is None:
        raise PipelineError(f"{cur.path}: unknown variable '{name}' (set it with --var {name}=VALUE)")
    return default


def source(name: str, **options: object) -> None:
    """A streaming read of topics, usable as the temporary view `name` (like SQL's CREATE SOURCE)."""
    cur = _current("source")
    cur.pipeline.add(Source(name, {k: _text(v) for k, v in options.items()}, _where(cur)))


@overload
def view(fn: F, /) -> F: ...
@overload
def view(*, name: str | None = None) -> Callable[[F], F]: ...
def view(fn: F | None = None, /, *, name: str | None = None) -> F | Callable[[F], F]:
    """`fn(spark) -> DataFrame` becomes the temporary view `name` (the function's name by default)."""
    def register(f: F) -> F:
        cur = _current("view")
        cur.pipeline.add(View(name or f.__name__, _where(cur), build=f))
        return f
    return register(fn) if fn is not None else register


def flow(*, topic: str, name: str | None = None, **options: object) -> Callable[[F], F]:
    """`fn(spark) -> streaming DataFrame` written to `topic` by the odradek sink.

    Keyword options are sink options (deliveryGuarantee, kafka.*) plus outputMode
    (append, update, complete). Use `**{"kafka.acks": "all"}` for dotted names.
    """
    def register(f: F) -> F:
        cur = _current("flow")
        opts = {k: _text(v) for k, v in options.items()}
        if "topic" in {k.lower() for k in opts}:
            raise PipelineError(f"{_where(cur)}: flow '{name or f.__name__}': give topic= once")
        mode = next((v for k, v in opts.items() if k.lower() == "outputmode"), "append")
        cur.pipeline.add(Flow(name or f.__name__, _where(cur), {**opts, "topic": topic},
                              output_mode=mode, build=f))
        return f
    return register


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
