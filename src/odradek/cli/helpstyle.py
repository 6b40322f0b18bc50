"""How `odradek ... --help` reads: plain text like rpk's, no type tags, defaults as typed.

typer prints a value's Python type as a tag (`<bool>`, `<list[str]>`, `<float>`) and a
float default as `30.0`. odradek's help shows an option's metavar (`--timeout SECONDS`),
nothing after a flag, argument names in capitals (`GROUP`), and defaults the way a user
would type them (`30`, not `30.0`). typer has no hook for this, so `install()` replaces
the three methods that produce those strings; everything else is typer's own output.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

# Rich's boxed help costs a 50 ms import and is nothing like rpk's plain listing.
os.environ.setdefault("TYPER_USE_RICH", "0")

_TYPE_WORDS = {int: "INT", float: "NUMBER", str: "TEXT", Path: "PATH"}


def _type_word(param: Any) -> str:
    annotation = param.type_descriptor.annotation
    args = getattr(annotation, "__args__", None)
    if args and getattr(annotation, "__origin__", None) is list:
        annotation = args[0]
    return _TYPE_WORDS.get(annotation, "VALUE")


def _default_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_default_text(v) for v in value)
    return str(value)


_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    from typer import core

    original_default = core.TyperOption._get_default_string

    def option_type(self: Any, ctx: Any) -> str | None:
        if self.is_flag or self.count:
            return None
        return self.metavar or _type_word(self)

    def argument_name(self: Any) -> str:
        return self.metavar or self.name.upper()

    def usage_name(self: Any) -> str:
        # click's convention: NAME when required, [NAME] when optional, ... when repeatable
        name = self.display_name_raw
        if not self.required and not name.startswith("["):
            name = f"[{name}]"
        if self.nargs != 1 and not name.endswith("..."):
            name += "..."
        return str(name)

    def option_default(self: Any, *, ctx: Any, show_default_is_str: bool,
                       default_value: Any) -> str:
        flag = getattr(self, "is_bool_flag", False)
        if show_default_is_str or (flag and self.secondary_opts):
            return str(original_default(self, ctx=ctx, show_default_is_str=show_default_is_str,
                                        default_value=default_value))
        if flag or default_value in ([], (), None, ""):
            return ""
        return _default_text(default_value)

    def number_range(self: Any) -> str | None:
        low, high = self.min, self.max
        if low is None and high is None:
            return None
        if high is None:
            return f"at least {_default_text(low)}"
        if low is None:
            return f"at most {_default_text(high)}"
        return f"{_default_text(low)} to {_default_text(high)}"

    core.TyperOption._get_number_range_help_str = number_range  # type: ignore[method-assign]
    core.TyperOption.display_type_rich = option_type  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]
    core.TyperArgument.display_name_raw = property(argument_name)  # type: ignore[assignment,method-assign]
    core.TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
    core.TyperOption._get_default_string = option_default  # type: ignore[method-assign]
    core.TyperArgument._get_default_string = option_default  # type: ignore[method-assign]
