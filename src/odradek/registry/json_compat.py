"""JSON Schema compatibility as a subset question: does every document the writer's schema
accepts also satisfy the reader's? (BACKWARD: new reader, old writer; FORWARD: the reverse.)

Covers the content-model rules Confluent documents: types (integer widens to number), enums,
bounds (max*/min*), `required`, properties under open and closed content models
(`additionalProperties`), and `items`, recursively. Other keywords ($ref, combinators,
patterns, formats...) must be equal on both sides, or the pair is reported as a change.
"""

from __future__ import annotations

from typing import Any

UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
HANDLED = {"type", "enum", "properties", "required", "additionalProperties", "items", *UPPER,
           *LOWER, "title", "description", "$schema", "$id", "default", "examples", "$comment"}


def _types(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _check(reader: Any, writer: Any, path: str, out: list[str]) -> None:
    if reader is True or reader == {}:
        return
    if writer is False:
        return
    if reader is False:
        out.append(f"{path or '/'}: the reader accepts nothing")
        return
    if writer is True:
        writer = {}
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return
    at = path or "/"
    rtypes, wtypes = _types(reader), _types(writer)
    if rtypes is not None:
        if wtypes is None:
            out.append(f"{at}: the reader narrows any type to {sorted(rtypes)}")
        else:
            wider = {t for t in wtypes if t not in rtypes
                     and not (t == "integer" and "number" in rtypes)}
            if wider:
                out.append(f"{at}: the reader does not accept type {sorted(wider)}")
    if "enum" in reader:
        extra = ([v for v in writer["enum"] if v not in reader["enum"]]
                 if "enum" in writer else ["<any value>"])
        if extra:
            out.append(f"{at}: the reader's enum lacks {extra}")
    for key in UPPER:
        if key in reader and not (key in writer and writer[key] <= reader[key]):
            out.append(f"{at}: {key} narrowed to {reader[key]}")
    for key in LOWER:
        if key in reader and not (key in writer and writer[key] >= reader[key]):
            out.append(f"{at}: {key} raised to {reader[key]}")
    missing = set(reader.get("required", [])) - set(writer.get("required", []))
    if missing:
        out.append(f"{at}: the reader requires {sorted(missing)}")
    _check_properties(reader, writer, path, out)
    if isinstance(reader.get("items"), (dict, bool)):
        _check(reader["items"], writer.get("items", True), f"{path}/items", out)
    for key in sorted((set(reader) | set(writer)) - HANDLED):
        if reader.get(key) != writer.get(key):
            out.append(f"{at}: {key} changed")


def _check_properties(reader: dict[str, Any], writer: dict[str, Any], path: str,
                      out: list[str]) -> None:
    rprops, wprops = reader.get("properties", {}), writer.get("properties", {})
    r_extra = reader.get("additionalProperties", True)
    w_extra = writer.get("additionalProperties", True)
    for name, rsub in rprops.items():
        # A property the writer does not declare may still come from its open content model.
        _check(rsub, wprops.get(name, w_extra), f"{path}/properties/{name}", out)
    for name, wsub in wprops.items():
        if name not in rprops:
            if r_extra is False:
                out.append(f"{path}/properties/{name}: the reader's closed content model lacks "
                           "the writer's property")
            else:
                _check(r_extra, wsub, f"{path}/properties/{name}", out)
    if r_extra is not True and w_extra is not False:
        if r_extra is False:
            out.append(f"{path or '/'}: the reader's content model is closed, the writer's open")
        else:
            _check(r_extra, w_extra, f"{path}/additionalProperties", out)


def can_read(reader: Any, writer: Any) -> list[str]:
    """Why documents valid under `writer` may be invalid under `reader`; empty when none."""
    out: list[str] = []
    _check(reader, writer, "", out)
    return out
