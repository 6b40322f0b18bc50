"""Protobuf schemas: `.proto` text (parsed by proto-schema-parser) or a base64
FileDescriptorProto (what confluent-kafka's ProtobufSerializer sends) -> one FileDescriptorProto.

The descriptor is the form everything else works on: it is checked by protobuf's own
DescriptorPool (unknown types, duplicate numbers, bad names), rendered back as `.proto` text
(`render`, the canonical form ids are given by) and as base64 (`format=serialized`), and
compared by protobuf_compat. Imports are the schema's references: each `import "x.proto"`
must name a reference whose name is "x.proto", except Google's well-known types
(google/protobuf/*.proto), which protobuf ships. Custom options (`(my.opt) = ...`) are not kept
in the descriptor: two schemas that differ only there get one id.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

from odradek.registry.errors import invalid_schema

FDP = descriptor_pb2.FileDescriptorProto
F = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": F.TYPE_DOUBLE, "float": F.TYPE_FLOAT, "int64": F.TYPE_INT64,
    "uint64": F.TYPE_UINT64, "int32": F.TYPE_INT32, "fixed64": F.TYPE_FIXED64,
    "fixed32": F.TYPE_FIXED32, "bool": F.TYPE_BOOL, "string": F.TYPE_STRING,
    "bytes": F.TYPE_BYTES, "uint32": F.TYPE_UINT32, "sfixed32": F.TYPE_SFIXED32,
    "sfixed64": F.TYPE_SFIXED64, "sint32": F.TYPE_SINT32, "sint64": F.TYPE_SINT64,
}
SCALAR_NAMES = {v: k for k, v in SCALARS.items()}
WELL_KNOWN_PREFIX = "google/protobuf/"
MAX_NUMBER = 536_870_911  # 2^29 - 1, the largest field number
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


@dataclass
class ProtoSchema:
    """A parsed file and every file it depends on (by import name, transitively)."""

    file: Any  # FileDescriptorProto, name cleared
    deps: dict[str, Any] = field(default_factory=dict)

    def serialized(self) -> str:
        return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")


class ProtoError(ValueError):
    pass


# ---- text -> AST -----------------------------------------------------------------------------
def _parse_ast(text: str) -> Any:
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class Raise(ErrorListener):  # type: ignore[misc]
        # The library's default listeners print syntax errors and go on; we refuse instead.
        def syntaxError(self, recognizer: Any, symbol: Any, line: int, column: int, msg: str,
                        e: Any) -> None:
            raise ProtoError(f"line {line}:{column} {msg}")

    def quiet(obj: Any) -> None:
        obj.removeErrorListeners()
        obj.addErrorListener(Raise())

    try:
        return Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
    except ProtoError:
        raise
    except RecursionError:
        raise ProtoError("the schema nests too deeply") from None
    except Exception as exc:  # the ANTLR visitor on input its grammar let through
        raise ProtoError(f"{type(exc).__name__}: {exc}") from None


# ---- AST -> descriptor -----------------------------------------------------------------------
def _set_options(target: Any, options: list[Any]) -> None:
    """Set the standard options whose names and value types the options message knows."""
    for opt in options:
        name = opt.name
        if name.startswith("(") or name not in target.DESCRIPTOR.fields_by_name:
            continue  # a custom option, or one this options message does not have
        value = opt.value
        value = getattr(value, "name", value)  # an Identifier (enum value name)
        fd = target.DESCRIPTOR.fields_by_name[name]
        try:
            if fd.enum_type is not None and isinstance(value, str):
                value = fd.enum_type.values_by_name[value].number
            setattr(target, name, value)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ProtoError(f"option {name} = {opt.value!r} is not valid") from None


def _ranges(items: list[str], to: Any, max_exclusive: bool) -> None:
    for item in items:
        parts = [p.strip() for p in str(item).split("to")]
        try:
            start = int(parts[0], 0)
            end = (MAX_NUMBER if parts[-1] == "max" else int(parts[-1], 0))
        except ValueError:
            raise ProtoError(f"bad range {item!r}") from None
        r = to.add()
        r.start = start
        r.end = end + 1 if max_exclusive else end


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


class _Builder:
    def __init__(self, syntax: str) -> None:
        self.proto3 = syntax == "proto3"

    def field(self, msg: Any, node: Any, oneof: int | None = None) -> None:
        from proto_schema_parser import ast

        f = msg.field.add()
        f.name, f.number = node.name, node.number
        if isinstance(node, ast.MapField):
            entry = msg.nested_type.add()
            entry.name = _camel(node.name) + "Entry"
            entry.options.map_entry = True
            for i, (name, kind) in enumerate((("key", node.key_type), ("value", node.value_type))):
                ef = entry.field.add()
                ef.name, ef.number, ef.label = name, i + 1, F.LABEL_OPTIONAL
                self.type_of(ef, kind)
            f.label, f.type, f.type_name = F.LABEL_REPEATED, F.TYPE_MESSAGE, entry.name
        elif isinstance(node, ast.Group):
            group = self.message(msg.nested_type.add(), ast.Message(node.name, node.elements))
            f.name = node.name.lower()
            f.type, f.type_name = F.TYPE_GROUP, group.name
            f.label = self.label(node.cardinality)
        else:
            self.type_of(f, node.type)
            f.label = self.label(node.cardinality)
            if self.proto3 and node.cardinality == ast.FieldCardinality.OPTIONAL and oneof is None:
                f.proto3_optional = True  # its synthetic oneof is added after the real ones
        if oneof is not None:
            f.oneof_index = oneof
        for opt in getattr(node, "options", []):
            if opt.name == "default":
                f.default_value = _default_text(opt.value)
            elif opt.name == "json_name":
                f.json_name = str(opt.value)
        _set_options(f.options, [o for o in getattr(node, "options", [])
                                 if o.name not in ("default", "json_name")])
        if not f.options.ListFields():
            f.ClearField("options")

    def label(self, cardinality: Any) -> int:
        name = getattr(cardinality, "value", None)
        if name == "REPEATED":
            return F.LABEL_REPEATED
        if name == "REQUIRED":
            return F.LABEL_REQUIRED
        return F.LABEL_OPTIONAL

    def type_of(self, f: Any, kind: str) -> None:
        if kind in SCALARS:
            f.type = SCALARS[kind]
        else:
            f.type_name = kind  # resolved to a full name (and MESSAGE or ENUM) later

    def message(self, msg: Any, node: Any) -> Any:
        from proto_schema_parser import ast

        msg.name = node.name
        for el in node.elements:
            if isinstance(el, (ast.Field, ast.MapField, ast.Group)):
                self.field(msg, el)
            elif isinstance(el, ast.OneOf):
                index = len(msg.oneof_decl)
                decl = msg.oneof_decl.add()
                decl.name = el.name
                for sub in el.elements:
                    if isinstance(sub, (ast.Field, ast.Group)):
                        self.field(msg, sub, oneof=index)
                    elif isinstance(sub, ast.Option):
                        _set_options(decl.options, [sub])
            elif isinstance(el, ast.Message):
                self.message(msg.nested_type.add(), el)
            elif isinstance(el, ast.Enum):
                self.enum(msg.enum_type.add(), el)
            elif isinstance(el, ast.Reserved):
                _ranges(el.ranges, msg.reserved_range, max_exclusive=True)
                msg.reserved_name.extend(el.names)
            elif isinstance(el, ast.ExtensionRange):
                _ranges(el.ranges, msg.extension_range, max_exclusive=True)
            elif isinstance(el, ast.Extension):
                self.extension(msg.extension, el)
            elif isinstance(el, ast.Option):
                _set_options(msg.options, [el])
        # proto3 `optional` fields each get a synthetic oneof, after the declared ones.
        for f in msg.field:
            if f.proto3_optional:
                f.oneof_index = len(msg.oneof_decl)
                msg.oneof_decl.add().name = "_" + f.name
        return msg

    def extension(self, into: Any, node: Any) -> None:
        holder = descriptor_pb2.DescriptorProto()
        for el in node.elements:
            self.field(holder, el)
        for f in holder.field:
            f.extendee = node.typeName
            into.add().CopyFrom(f)

    def enum(self, en: Any, node: Any) -> None:
        from proto_schema_parser import ast

        en.name = node.name
        for el in node.elements:
            if isinstance(el, ast.EnumValue):
                v = en.value.add()
                v.name, v.number = el.name, el.number
                _set_options(v.options, el.options)
                if not v.options.ListFields():
                    v.ClearField("options")
            elif isinstance(el, ast.EnumReserved):
                _ranges(el.ranges, en.reserved_range, max_exclusive=False)
                en.reserved_name.extend(el.names)
            elif isinstance(el, ast.Option):
                _set_options(en.options, [el])


def _default_text(value: Any) -> str:
    value = getattr(value, "name", value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _from_ast(tree: Any) -> Any:
    from proto_schema_parser import ast

    fdp = FDP()
    syntax = tree.syntax or "proto2"
    if tree.edition:
        raise ProtoError("editions are not supported yet; use syntax = \"proto2\" or \"proto3\"")
    if syntax not in ("proto2", "proto3"):
        raise ProtoError(f"unknown syntax {syntax!r}")
    fdp.syntax = syntax
    builder = _Builder(syntax)
    for el in tree.file_elements:
        if isinstance(el, ast.Package):
            fdp.package = el.name
        elif isinstance(el, ast.Import):
            if el.public:
                fdp.public_dependency.append(len(fdp.dependency))
            if el.weak:
                fdp.weak_dependency.append(len(fdp.dependency))
            fdp.dependency.append(el.name)
        elif isinstance(el, ast.Option):
            _set_options(fdp.options, [el])
        elif isinstance(el, ast.Message):
            builder.message(fdp.message_type.add(), el)
        elif isinstance(el, ast.Enum):
            builder.enum(fdp.enum_type.add(), el)
        elif isinstance(el, ast.Extension):
            builder.extension(fdp.extension, el)
        elif isinstance(el, ast.Service):
            svc = fdp.service.add()
            svc.name = el.name
            for m in el.elements:
                if isinstance(m, ast.Method):
                    md = svc.method.add()
                    md.name = m.name
                    md.input_type, md.output_type = m.input_type.type, m.output_type.type
                    if m.input_type.stream:
                        md.client_streaming = True
                    if m.output_type.stream:
                        md.server_streaming = True
                elif isinstance(m, ast.Option):
                    _set_options(svc.options, [m])
    return fdp


# ---- names -----------------------------------------------------------------------------------
def _walk_types(prefix: str, messages: Any, enums: Any) -> Iterator[tuple[str, str, Any]]:
    for en in enums:
        yield f"{prefix}.{en.name}", "enum", en
    for msg in messages:
        name = f"{prefix}.{msg.name}"
        yield name, "message", msg
        yield from _walk_types(name, msg.nested_type, msg.enum_type)


def types_of(fdp: Any) -> dict[str, tuple[str, Any]]:
    """Every type a file declares, by full name with a leading dot."""
    prefix = f".{fdp.package}" if fdp.package else ""
    return {name: (kind, node) for name, kind, node in
            _walk_types(prefix, fdp.message_type, fdp.enum_type)}


def _resolve(name: str, scope: str, known: dict[str, tuple[str, Any]]) -> str:
    if name.startswith("."):
        if name in known:
            return name
        raise ProtoError(f"type {name} is not defined")
    first = name.split(".", 1)[0]
    parts = scope.split(".") if scope else []
    # Innermost scope first (protobuf's rule: the first component decides where the name is).
    while True:
        base = ".".join(parts)
        candidate = f"{base}.{first}" if base or parts else f".{first}"
        if candidate in known or any(k.startswith(candidate + ".") for k in known):
            full = f"{base}.{name}" if base or parts else f".{name}"
            if full in known:
                return full
            raise ProtoError(f"type {name} is not defined (found {candidate} but not {full})")
        if not parts:
            raise ProtoError(f"type {name} is not defined")
        parts.pop()


def _link(fdp: Any, known: dict[str, tuple[str, Any]]) -> None:
    """Give every field and method type its full name, and MESSAGE/ENUM kind."""
    pkg = f".{fdp.package}" if fdp.package else ""

    def fix_field(f: Any, scope: str) -> None:
        if f.HasField("extendee"):
            f.extendee = _resolve(f.extendee, scope, known)
        if f.type_name:
            full = _resolve(f.type_name, scope, known)
            f.type_name = full
            if f.type != F.TYPE_GROUP:
                f.type = F.TYPE_ENUM if known[full][0] == "enum" else F.TYPE_MESSAGE

    def fix_message(msg: Any, scope: str) -> None:
        inner = f"{scope}.{msg.name}"
        for f in msg.field:
            fix_field(f, inner)
        for f in msg.extension:
            fix_field(f, inner)
        for nested in msg.nested_type:
            fix_message(nested, inner)

    for msg in fdp.message_type:
        fix_message(msg, pkg)
    for f in fdp.extension:
        fix_field(f, pkg)
    for svc in fdp.service:
        for m in svc.method:
            for attr in ("input_type", "output_type"):
                full = _resolve(getattr(m, attr), pkg, known)
                if known[full][0] != "message":
                    raise ProtoError(f"method {m.name}: {full} is not a message")
                setattr(m, attr, full)


# ---- the entry points ------------------------------------------------------------------------
def well_known(name: str) -> Any:
    """The descriptor of one of Google's well-known files (google/protobuf/*.proto)."""
    import importlib

    module = name[: -len(".proto")].replace("/", ".") + "_pb2"
    try:
        mod = importlib.import_module(module)
    except ImportError:
        raise ProtoError(f"unknown import {name!r}: give it as a reference") from None
    out = FDP()
    mod.DESCRIPTOR.CopyToProto(out)
    return out


def _visible(fdp: Any, deps: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Types this file may use: its own and those of its imports (and their public imports)."""
    known = dict(types_of(fdp))
    seen: set[str] = set()

    def add(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        dep = deps[name]
        known.update(types_of(dep))
        for i in dep.public_dependency:
            add(dep.dependency[i])

    for name in fdp.dependency:
        add(name)
    return known


def parse(text: str, references: dict[str, ProtoSchema]) -> ProtoSchema:
    """Parse `.proto` text or a base64 FileDescriptorProto; raise 42201 when it is not one.

    `references` maps each import name to the referenced schema (already parsed).
    """
    try:
        fdp = _decode(text, references)
        deps: dict[str, Any] = {}
        for name in fdp.dependency:
            if name in references:
                deps.update(references[name].deps)
                deps[name] = references[name].file
            elif name.startswith(WELL_KNOWN_PREFIX):
                deps[name] = well_known(name)
            else:
                raise ProtoError(f"import {name!r} has no reference of that name")
        _check(fdp, deps)
    except ProtoError as exc:
        raise invalid_schema(str(exc)) from None
    return ProtoSchema(fdp, deps)


def _decode(text: str, references: dict[str, ProtoSchema]) -> Any:
    stripped = text.strip()
    if _looks_base64(stripped):
        fdp = FDP()
        try:
            fdp.ParseFromString(base64.b64decode(stripped, validate=True))
        except (binascii.Error, ValueError, Exception) as exc:  # DecodeError is an Exception
            raise ProtoError(f"not .proto text nor a base64 FileDescriptorProto: {exc}") from None
        fdp.ClearField("name")
        fdp.ClearField("source_code_info")
        return fdp
    fdp = _from_ast(_parse_ast(text))
    deps = {n: (references[n].file if n in references else
                well_known(n) if n.startswith(WELL_KNOWN_PREFIX) else FDP())
            for n in fdp.dependency}
    for name in fdp.dependency:
        if name in references:
            deps.update(references[name].deps)
    _link(fdp, _visible(fdp, deps))
    return fdp


def is_serialized(text: str) -> bool:
    """Is `text` a base64 FileDescriptorProto rather than `.proto` text?"""
    return _looks_base64(text.strip())


def _looks_base64(text: str) -> bool:
    # .proto text always has a space, `;` or a quote; base64 is letters, digits, + / and =.
    return _BASE64.fullmatch(text) is not None


def _check(fdp: Any, deps: dict[str, Any]) -> None:
    """Let protobuf's DescriptorPool build the file: it refuses what protoc would refuse."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(name: str, proto: Any) -> None:
        if name in added:
            return
        added.add(name)
        for d in proto.dependency:
            add(d, deps[d] if d in deps else well_known(d))
        copy = FDP()
        copy.CopyFrom(proto)
        copy.name = name
        try:
            pool.Add(copy)
        except Exception as exc:  # TypeError from upb, or the C++ pool's error
            raise ProtoError(f"{exc}") from None

    main = FDP()
    main.CopyFrom(fdp)
    for d in fdp.dependency:
        if d not in deps:
            raise ProtoError(f"import {d!r} has no reference of that name")
    add("__odradek_schema__.proto", main)
    try:
        pool.FindFileByName("__odradek_schema__.proto")
    except KeyError as exc:
        raise ProtoError(str(exc)) from None
