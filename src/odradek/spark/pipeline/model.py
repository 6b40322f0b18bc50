"""What a pipeline declares: sources, views, flows, in the order the files declare them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class PipelineError(ValueError):
    """A bad pipeline definition; the message names the file, the element and the problem."""


@dataclass(frozen=True)
class Source:
    """A streaming read of topics, visible to SQL and Python as a temporary view `name`."""

    name: str
    options: dict[str, str]
    where: str


@dataclass(frozen=True)
class View:
    """A temporary view: a SQL query, or a Python function returning a DataFrame."""

    name: str
    where: str
    sql: str | None = None
    build: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Statement:
    """Any other SQL statement, run as is (e.g. CREATE TEMPORARY FUNCTION)."""

    sql: str
    where: str


@dataclass(frozen=True)
class Flow:
    """A streaming query from a query or function to a topic (or to a Python build hook)."""

    name: str
    where: str
    options: dict[str, str] = field(default_factory=dict)
    output_mode: str = "append"
    sql: str | None = None
    build: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class Hook:
    """A module's `build(spark, ctx)`: starts its own queries and returns them."""

    name: str
    where: str
    build: Callable[..., Any]


Element = Source | View | Statement | Flow | Hook


@dataclass
class Pipeline:
    elements: list[Element] = field(default_factory=list)

    def flows(self) -> list[Flow]:
        return [e for e in self.elements if isinstance(e, Flow)]

    def add(self, element: Element) -> None:
        name = getattr(element, "name", None)
        if name is not None:
            for other in self.elements:
                if type(other) is type(element) and getattr(other, "name", None) == name:
                    raise PipelineError(f"{element.where}: {type(element).__name__.lower()} '{name}' "
                                        f"is already declared at {other.where}")
        self.elements.append(element)
