"""Avro schema resolution as a compatibility check: can a reader schema read a writer's data?

Works on fastavro's parsed form (names are full names; a named type used again appears as its
name, looked up in the named-types table). The rules are the Avro specification's "Schema
Resolution": promotions int->long->float->double and string<->bytes, records matched by
(full or short) name or alias with reader fields missing in the writer needing a default, enum
writer symbols known to the reader (or a reader default), fixed sizes equal, unions branch by
branch. Logical types resolve as their underlying types.
"""

from __future__ import annotations

from typing import Any

PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}
NAMED = ("record", "enum", "fixed", "error")


class _Checker:
    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.rn = reader_names
        self.wn = writer_names
        self.in_progress: set[tuple[str, str]] = set()
        self.errors: list[str] = []

    def resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema in names:
            return names[schema]
        return schema

    def type_of(self, schema: Any) -> str:
        if isinstance(schema, list):
            return "union"
        if isinstance(schema, dict):
            return str(schema["type"])
        return str(schema)

    def check(self, reader: Any, writer: Any, path: str) -> bool:
        reader = self.resolve(reader, self.rn)
        writer = self.resolve(writer, self.wn)
        rt, wt = self.type_of(reader), self.type_of(writer)
        if wt == "union":
            ok = True
            for i, branch in enumerate(writer):
                if not self.readable(reader, branch):
                    self.errors.append(f"{path}: the reader cannot read the writer's union "
                                       f"branch {i} ({self.type_of(self.resolve(branch, self.wn))})")
                    ok = False
            return ok
        if rt == "union":
            if any(self.readable(branch, writer) for branch in reader):
                return True
            self.errors.append(f"{path}: no branch of the reader's union matches the writer's {wt}")
            return False
        if rt in PROMOTIONS or wt in PROMOTIONS or rt in ("null", "boolean", "double") \
                or wt in ("null", "boolean", "double"):
            if rt == wt or rt in PROMOTIONS.get(wt, set()):
                return True
            self.errors.append(f"{path}: the reader's type {rt} cannot read the writer's {wt}")
            return False
        if (rt == "error" and wt == "record") or (rt == "record" and wt == "error"):
            rt = wt
        if rt != wt:
            self.errors.append(f"{path}: the reader's type {rt} cannot read the writer's {wt}")
            return False
        if rt == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if rt == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if not self.names_match(reader, writer):
            self.errors.append(f"{path}: the reader's name {reader['name']} does not match the "
                               f"writer's {writer['name']}")
            return False
        if rt == "fixed":
            if reader["size"] != writer["size"]:
                self.errors.append(f"{path}: fixed size {writer['size']} read as {reader['size']}")
                return False
            return True
        if rt == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                self.errors.append(f"{path}: the reader's enum lacks the writer's symbols {missing}")
                return False
            return True
        return self.check_record(reader, writer, path)

    def readable(self, reader: Any, writer: Any) -> bool:
        """A trial check whose errors are dropped (union branch matching)."""
        saved = len(self.errors)
        ok = self.check(reader, writer, "")
        del self.errors[saved:]
        return ok

    def names_match(self, reader: dict[str, Any], writer: dict[str, Any]) -> bool:
        rname, wname = reader["name"], writer["name"]
        short = wname.rsplit(".", 1)[-1]
        aliases = {a.rsplit(".", 1)[-1] for a in reader.get("aliases", [])} | set(
            reader.get("aliases", []))
        return rname == wname or rname.rsplit(".", 1)[-1] == short or wname in aliases \
            or short in aliases

    def check_record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        pair = (reader["name"], writer["name"])
        if pair in self.in_progress:  # a recursive type: assume the pair holds while checking it
            return True
        self.in_progress.add(pair)
        try:
            ok = True
            wfields = {f["name"]: f for f in writer["fields"]}
            for f in reader["fields"]:
                names = [f["name"], *f.get("aliases", [])]
                wf = next((wfields[n] for n in names if n in wfields), None)
                fpath = f"{path}/fields/{f['name']}"
                if wf is None:
                    if "default" not in f:
                        self.errors.append(f"{fpath}: the reader's field {f['name']} has no "
                                           "default and is missing from the writer")
                        ok = False
                elif not self.check(f["type"], wf["type"], fpath):
                    ok = False
            return ok
        finally:
            self.in_progress.discard(pair)


def can_read(reader: tuple[Any, dict[str, Any]], writer: tuple[Any, dict[str, Any]]) -> list[str]:
    """Why `reader` cannot read data written with `writer`; empty when it can.

    Each side is fastavro's (parsed schema, named types) pair from schemas.parse.
    """
    checker = _Checker(reader[1], writer[1])
    checker.check(reader[0], writer[0], "")
    return checker.errors
