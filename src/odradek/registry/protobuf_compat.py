"""Protobuf compatibility: can a reader built from one schema parse what a writer of the other
serialized? Protobuf's wire rules ("Updating A Message Type" in the language guide), judged the
way Confluent's registry documents them:

- fields are matched by number: a new or removed optional field, a renamed field, a new or
  removed oneof, an added message or any enum change is compatible;
- a removed or renamed package, a removed message, a field whose kind changes (scalar, message,
  map) or whose scalar moves to another wire group (varint int32/int64/uint32/uint64/bool and
  enums; zigzag sint32/sint64; string/bytes; fixed32/sfixed32; fixed64/sfixed64; float;
  double) is not;
- proto2 `required` fields may be neither added nor removed; several existing fields may not
  move into one new oneof, nor one into an existing oneof;
- a numeric field may not switch between singular and repeated (packed encoding); string,
  bytes and message fields may.

`can_read(reader, writer)` lists the differences that break it (empty: compatible).
"""

from __future__ import annotations

from typing import Any

from odradek.registry.protobuf import F, ProtoSchema, types_of

GROUPS = {
    F.TYPE_INT32: "varint", F.TYPE_INT64: "varint", F.TYPE_UINT32: "varint",
    F.TYPE_UINT64: "varint", F.TYPE_BOOL: "varint", F.TYPE_ENUM: "varint",
    F.TYPE_SINT32: "zigzag", F.TYPE_SINT64: "zigzag",
    F.TYPE_STRING: "length-delimited", F.TYPE_BYTES: "length-delimited",
    F.TYPE_FIXED32: "fixed32", F.TYPE_SFIXED32: "fixed32",
    F.TYPE_FIXED64: "fixed64", F.TYPE_SFIXED64: "fixed64",
    F.TYPE_FLOAT: "float", F.TYPE_DOUBLE: "double",
}


class _Side:
    def __init__(self, schema: ProtoSchema) -> None:
        self.schema = schema
        self.types: dict[str, tuple[str, Any]] = {}
        self.package: dict[str, str] = {}
        for fdp in [schema.file, *schema.deps.values()]:
            for name, entry in types_of(fdp).items():
                self.types.setdefault(name, entry)
                self.package.setdefault(name, fdp.package)

    def local(self, full: str) -> str:
        pkg = self.package.get(full, "")
        return full[len(pkg) + 2:] if pkg else full[1:]

    def map_entry(self, f: Any) -> Any:
        if f.type == F.TYPE_MESSAGE and f.label == F.LABEL_REPEATED:
            found = self.types.get(f.type_name)
            if found and found[0] == "message" and found[1].options.map_entry:
                return found[1]
        return None

    def kind(self, f: Any) -> str:
        if self.map_entry(f) is not None:
            return "map"
        if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP):
            return "message"
        return "scalar"


class _Diff:
    def __init__(self, original: ProtoSchema, update: ProtoSchema) -> None:
        self.o = _Side(original)
        self.u = _Side(update)
        self.out: list[str] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, path: str, what: str) -> None:
        self.out.append(f"{path or '/'}: {what}")

    def files(self) -> None:
        o, u = self.o.schema.file, self.u.schema.file
        if o.package != u.package:
            self.add("", f"the package changed from {o.package!r} to {u.package!r}")
        self.messages("", list(o.message_type), list(u.message_type),
                      f".{o.package}" if o.package else "", f".{u.package}" if u.package else "")

    def messages(self, path: str, originals: list[Any], updates: list[Any], oscope: str,
                 uscope: str) -> None:
        by_name = {m.name: m for m in updates}
        for m in originals:
            if m.options.map_entry:
                continue
            if m.name not in by_name:
                self.add(f"{path}/{m.name}", "the message was removed")
            else:
                self.message(f"{path}/{m.name}", m, by_name[m.name], f"{oscope}.{m.name}",
                             f"{uscope}.{m.name}")

    def message(self, path: str, o: Any, u: Any, ofull: str, ufull: str) -> None:
        if (ofull, ufull) in self.seen:  # a recursive type: already being compared
            return
        self.seen.add((ofull, ufull))
        ofields = {f.number: f for f in o.field}
        ufields = {f.number: f for f in u.field}
        self.oneofs(path, o, u)
        for number in sorted(set(ofields) | set(ufields)):
            of, uf = ofields.get(number), ufields.get(number)
            fpath = f"{path}/{number}"
            if uf is None:
                assert of is not None
                if of.label == F.LABEL_REQUIRED:
                    self.add(fpath, f"the required field {of.name} was removed")
            elif of is None:
                if uf.label == F.LABEL_REQUIRED:
                    self.add(fpath, f"the required field {uf.name} was added")
            else:
                self.field(fpath, of, uf)
        self.messages(path, list(o.nested_type), list(u.nested_type), ofull, ufull)

    def oneofs(self, path: str, o: Any, u: Any) -> None:
        def members(msg: Any) -> dict[str, set[int]]:
            out: dict[str, set[int]] = {}
            for f in msg.field:
                if f.HasField("oneof_index") and not f.proto3_optional:
                    out.setdefault(msg.oneof_decl[f.oneof_index].name, set()).add(f.number)
            return out

        omembers, umembers = members(o), members(u)
        in_old_oneof = set().union(*omembers.values()) if omembers else set()
        old_plain = {f.number for f in o.field if f.number not in in_old_oneof}
        for name, numbers in umembers.items():
            moved = numbers & old_plain
            existing = numbers & in_old_oneof
            if len(moved) > 1:
                self.add(f"{path}/{name}", f"fields {sorted(moved)} moved into one oneof")
            elif moved and existing:
                self.add(f"{path}/{name}", f"field {min(moved)} moved into an existing oneof")

    def field(self, path: str, of: Any, uf: Any) -> None:
        okind, ukind = self.o.kind(of), self.u.kind(uf)
        if okind != ukind:
            self.add(path, f"the field {uf.name} changed from a {okind} to a {ukind}")
            return
        if okind == "map":
            oe, ue = self.o.map_entry(of), self.u.map_entry(uf)
            for i, part in enumerate(("key", "value")):
                self.field(f"{path}/{part}", oe.field[i], ue.field[i])
            return
        if okind == "scalar":
            og, ug = GROUPS[of.type], GROUPS[uf.type]
            if og != ug:
                self.add(path, f"the field {uf.name} changed from {_type(of)} to {_type(uf)}, "
                               "another wire type")
            elif og not in ("length-delimited",) and \
                    (of.label == F.LABEL_REPEATED) != (uf.label == F.LABEL_REPEATED):
                self.add(path, f"the numeric field {uf.name} changed between singular and "
                               "repeated")
            return
        olocal, ulocal = self.o.local(of.type_name), self.u.local(uf.type_name)
        if olocal != ulocal:
            self.add(path, f"the field {uf.name} changed from message {olocal} to {ulocal}")
            return
        omsg, umsg = self.o.types.get(of.type_name), self.u.types.get(uf.type_name)
        if omsg and umsg:
            self.message(f"{path}({ulocal})", omsg[1], umsg[1], of.type_name, uf.type_name)


def _type(f: Any) -> str:
    from odradek.registry.protobuf import SCALAR_NAMES

    return "enum" if f.type == F.TYPE_ENUM else SCALAR_NAMES.get(f.type, str(f.type))


def can_read(reader: ProtoSchema, writer: ProtoSchema) -> list[str]:
    """Why a reader of `reader` may misread data written with `writer` (empty: it can read it).

    Confluent compares (original, update) = (writer, reader): the same thing."""
    diff = _Diff(writer, reader)
    diff.files()
    return diff.out
