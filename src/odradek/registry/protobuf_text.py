"""A FileDescriptorProto rendered as `.proto` text: the canonical form of a Protobuf schema.

One rendering for one descriptor, whatever text it came from: fixed indentation, full type
names (with the leading dot), standard options in field order, maps as `map<K, V>`, proto3
`optional` for synthetic oneofs. `normalize=True` also sorts what order does not change on the
wire: fields by number, nested types, enums and imports by name (Confluent's `normalize`).
"""

from __future__ import annotations

import json
from typing import Any

from odradek.registry.protobuf import FDP, SCALAR_NAMES, F

LABELS = {F.LABEL_OPTIONAL: "optional", F.LABEL_REQUIRED: "required",
          F.LABEL_REPEATED: "repeated"}


def _value(v: Any, fd: Any) -> str:
    if fd.enum_type is not None:
        return fd.enum_type.values_by_number[v].name if v in fd.enum_type.values_by_number \
            else str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return repr(v)


def _options(opts: Any) -> list[str]:
    return [f"{fd.name} = {_value(v, fd)}" for fd, v in opts.ListFields()]


class _Renderer:
    def __init__(self, fdp: Any, normalize: bool) -> None:
        self.fdp = fdp
        self.normalize = normalize
        self.lines: list[str] = []
        self.proto3 = fdp.syntax == "proto3"

    def out(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def field_type(self, f: Any, entries: dict[str, Any]) -> str:
        if f.type_name in entries:
            entry = entries[f.type_name]
            key, value = entry.field[0], entry.field[1]
            return f"map<{self.field_type(key, {})}, {self.field_type(value, {})}>"
        if f.type in (F.TYPE_MESSAGE, F.TYPE_ENUM, F.TYPE_GROUP) or f.type_name:
            return f.type_name
        return SCALAR_NAMES[f.type]

    def field(self, depth: int, f: Any, entries: dict[str, Any], in_oneof: bool) -> None:
        kind = self.field_type(f, entries)
        label = ""
        if not in_oneof and not kind.startswith("map<"):
            if f.label == F.LABEL_REPEATED or f.label == F.LABEL_REQUIRED:
                label = LABELS[f.label] + " "
            elif not self.proto3 or f.proto3_optional:
                label = "optional "
        opts = []
        if f.HasField("default_value"):
            opts.append(f"default = {_default(f)}")
        if f.HasField("json_name"):
            opts.append(f"json_name = {json.dumps(f.json_name)}")
        opts += _options(f.options)
        suffix = f" [{', '.join(opts)}]" if opts else ""
        self.out(depth, f"{label}{kind} {f.name} = {f.number}{suffix};")

    def message(self, depth: int, msg: Any, scope: str) -> None:
        full = f"{scope}.{msg.name}"
        self.out(depth, f"message {msg.name} {{")
        inner = depth + 1
        for opt in _options(msg.options):
            self.out(inner, f"option {opt};")
        entries = {f"{full}.{n.name}": n for n in msg.nested_type if n.options.map_entry}
        real_oneofs = [i for i, _ in enumerate(msg.oneof_decl)
                       if not any(f.proto3_optional and f.oneof_index == i for f in msg.field)]
        fields = sorted(msg.field, key=lambda f: f.number) if self.normalize else list(msg.field)
        done_oneofs: set[int] = set()
        for f in fields:
            if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
                if f.oneof_index in done_oneofs:
                    continue
                done_oneofs.add(f.oneof_index)
                decl = msg.oneof_decl[f.oneof_index]
                self.out(inner, f"oneof {decl.name} {{")
                for opt in _options(decl.options):
                    self.out(inner + 1, f"option {opt};")
                for member in fields:
                    if member.HasField("oneof_index") and member.oneof_index == f.oneof_index:
                        self.field(inner + 1, member, entries, True)
                self.out(inner, "}")
            else:
                self.field(inner, f, entries, False)
        for r in msg.reserved_range:
            self.out(inner, f"reserved {_range(r.start, r.end - 1)};")
        if msg.reserved_name:
            self.out(inner, "reserved " + ", ".join(json.dumps(n) for n in msg.reserved_name)
                     + ";")
        for r in msg.extension_range:
            self.out(inner, f"extensions {_range(r.start, r.end - 1)};")
        self.types(inner, [n for n in msg.nested_type if not n.options.map_entry],
                   msg.enum_type, full)
        self.extensions(inner, msg.extension)
        self.out(depth, "}")

    def enum(self, depth: int, en: Any) -> None:
        self.out(depth, f"enum {en.name} {{")
        for opt in _options(en.options):
            self.out(depth + 1, f"option {opt};")
        values = sorted(en.value, key=lambda v: (v.number, v.name)) if self.normalize \
            else list(en.value)
        for v in values:
            opts = _options(v.options)
            suffix = f" [{', '.join(opts)}]" if opts else ""
            self.out(depth + 1, f"{v.name} = {v.number}{suffix};")
        for r in en.reserved_range:
            self.out(depth + 1, f"reserved {_range(r.start, r.end)};")
        if en.reserved_name:
            self.out(depth + 1, "reserved " + ", ".join(json.dumps(n) for n in en.reserved_name)
                     + ";")
        self.out(depth, "}")

    def types(self, depth: int, messages: Any, enums: Any, scope: str) -> None:
        msgs, ens = list(messages), list(enums)
        if self.normalize:
            msgs.sort(key=lambda m: m.name)
            ens.sort(key=lambda e: e.name)
        for m in msgs:
            self.message(depth, m, scope)
        for e in ens:
            self.enum(depth, e)

    def extensions(self, depth: int, fields: Any) -> None:
        by_extendee: dict[str, list[Any]] = {}
        for f in fields:
            by_extendee.setdefault(f.extendee, []).append(f)
        for extendee, group in by_extendee.items():
            self.out(depth, f"extend {extendee} {{")
            for f in group:
                self.field(depth + 1, f, {}, False)
            self.out(depth, "}")

    def render(self) -> str:
        fdp = self.fdp
        self.out(0, f"syntax = {json.dumps(fdp.syntax or 'proto2')};")
        if fdp.package:
            self.out(0, f"package {fdp.package};")
        imports = list(enumerate(fdp.dependency))
        if self.normalize:
            imports.sort(key=lambda item: item[1])
        for i, name in imports:
            kind = "public " if i in fdp.public_dependency else \
                "weak " if i in fdp.weak_dependency else ""
            self.out(0, f"import {kind}{json.dumps(name)};")
        for opt in _options(fdp.options):
            self.out(0, f"option {opt};")
        scope = f".{fdp.package}" if fdp.package else ""
        self.types(0, fdp.message_type, fdp.enum_type, scope)
        self.extensions(0, fdp.extension)
        for svc in fdp.service:
            self.out(0, f"service {svc.name} {{")
            for opt in _options(svc.options):
                self.out(1, f"option {opt};")
            for m in svc.method:
                cin = "stream " if m.client_streaming else ""
                sout = "stream " if m.server_streaming else ""
                self.out(1, f"rpc {m.name}({cin}{m.input_type}) returns "
                            f"({sout}{m.output_type});")
            self.out(0, "}")
        return "\n".join(self.lines) + "\n"


def _range(start: int, end: int) -> str:
    if end >= 536_870_911:
        return f"{start} to max"
    return str(start) if start == end else f"{start} to {end}"


def _default(f: Any) -> str:
    if f.type in (F.TYPE_STRING, F.TYPE_BYTES):
        return json.dumps(f.default_value)
    return f.default_value


def render(fdp: Any, normalize: bool = False) -> str:
    """`fdp` as `.proto` text (types fully qualified, so the text needs no resolution)."""
    copy = FDP()
    copy.CopyFrom(fdp)
    return _Renderer(copy, normalize).render()
