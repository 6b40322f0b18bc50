"""The registry's view of `_schemas`: records applied in order, and writes planned as records.

Sans-I/O: the store feeds it the topic's records (apply) and writes the records that the
plan_* methods return. Ids are global: the same schema (type, canonical text, references) gets
the same id in every subject, and a new id is one more than the highest id ever read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odradek.registry import errors, records
from odradek.registry.compat import DEFAULT_LEVEL, LEVELS, check
from odradek.registry.schemas import ParsedSchema, parse, with_extras

MODES = ("READWRITE", "READONLY", "IMPORT")
Record = tuple[dict[str, Any], dict[str, Any] | None]


@dataclass
class Version:
    subject: str
    version: int
    schema_id: int
    deleted: bool


@dataclass
class StoredSchema:
    schema_id: int
    parsed: ParsedSchema
    references: list[dict[str, Any]]


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, Version]] = {}
        self.schemas: dict[int, StoredSchema] = {}
        self.ids_by_identity: dict[tuple[Any, ...], int] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0

    # ---- reading the topic -------------------------------------------------------------
    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        kind = key.get("keytype")
        if kind == "SCHEMA":
            self._apply_schema(key, value)
        elif kind == "CONFIG":
            subject = key.get("subject")
            if value is None:
                self.configs.pop(subject, None)
            else:
                self.configs[subject] = value
        elif kind == "MODE":
            if value is None:
                self.modes.pop(key.get("subject"), None)
            else:
                self.modes[key.get("subject")] = str(value.get("mode"))
        elif kind == "DELETE_SUBJECT" and value is not None:
            upto = value.get("version")
            for v in self.subjects.get(str(value.get("subject")), {}).values():
                if upto is None or v.version <= upto:
                    v.deleted = True
        elif kind == "CLEAR_SUBJECT" and value is not None:
            versions = self.subjects.get(str(value.get("subject")), {})
            for number in [n for n, v in versions.items() if v.deleted]:
                del versions[number]
        # NOOP and unknown key types carry nothing for the view.

    def _apply_schema(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        subject, number = str(key["subject"]), int(key["version"])
        if value is None:  # a permanent delete (tombstone)
            self.subjects.get(subject, {}).pop(number, None)
            if subject in self.subjects and not self.subjects[subject]:
                del self.subjects[subject]
            return
        schema_id = int(value["id"])
        self.max_id = max(self.max_id, schema_id)
        if schema_id not in self.schemas:
            refs = list(value.get("references") or [])
            try:
                parsed = with_extras(parse(value.get("schemaType"), value["schema"], refs,
                                           self._referenced(refs)),
                                     value.get("metadata"), value.get("ruleSet"))
            except errors.RegistryError:
                # A record we cannot parse (another registry's type or version) is kept as text.
                parsed = ParsedSchema(str(value.get("schemaType") or "AVRO"), value["schema"],
                                      value["schema"])
            self.schemas[schema_id] = StoredSchema(schema_id, parsed, refs)
            self.ids_by_identity.setdefault(parsed.identity(), schema_id)
        self.subjects.setdefault(subject, {})[number] = Version(
            subject, number, schema_id, bool(value.get("deleted", False)))

    # ---- queries -----------------------------------------------------------------------
    def _referenced(self, refs: list[dict[str, Any]]) -> list[ParsedSchema]:
        out = []
        for ref in refs:
            if not isinstance(ref, dict):
                continue
            v = self.subjects.get(str(ref.get("subject")), {}).get(ref.get("version"))  # type: ignore[arg-type]
            if v is None:
                raise errors.invalid_schema(
                    f"reference {ref.get('name')} to {ref.get('subject')} version "
                    f"{ref.get('version')} not found")
            out.append(self.schemas[v.schema_id].parsed)
        return out

    def parse_request(self, body: dict[str, Any]) -> ParsedSchema:
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise errors.invalid_schema("references must be a list")
        parsed = parse(body.get("schemaType"), body.get("schema"), refs, self._referenced(refs))
        return with_extras(parsed, body.get("metadata"), body.get("ruleSet"))

    def subject_names(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s, vs in self.subjects.items() if s.startswith(prefix)
                      and any(deleted or not v.deleted for v in vs.values()))

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        found = [v for _, v in sorted(self.subjects.get(subject, {}).items())
                 if deleted or not v.deleted]
        if not found:
            raise errors.subject_not_found(subject)
        return found

    def version(self, subject: str, ref: str, deleted: bool = False) -> Version:
        live = self.versions(subject, deleted)
        if ref in ("latest", "-1"):
            return live[-1]
        number = parse_version(ref)
        for v in live:
            if v.version == number:
                return v
        raise errors.version_not_found(subject, ref)

    def level(self, subject: str | None) -> str:
        for key in (subject, None):
            config = self.configs.get(key)
            if config and config.get("compatibilityLevel"):
                return str(config["compatibilityLevel"])
        return DEFAULT_LEVEL

    def describe(self, v: Version) -> dict[str, Any]:
        stored = self.schemas[v.schema_id]
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id,
                               "schema": stored.parsed.text}
        if stored.parsed.schema_type != "AVRO":
            out["schemaType"] = stored.parsed.schema_type
        return {**out, **extras_of(stored)}

    def lookup(self, subject: str, parsed: ParsedSchema, deleted: bool = False) -> Version:
        live = self.versions(subject, deleted)
        for v in reversed(live):
            if self.schemas[v.schema_id].parsed.identity() == parsed.identity():
                return v
        raise errors.schema_not_found()

    # ---- writes, planned as records --------------------------------------------------------
    def plan_register(self, subject: str, parsed: ParsedSchema,
                      references: list[dict[str, Any]]) -> tuple[int, list[Record]]:
        """The id the schema gets in `subject`, and the records to write (none if present)."""
        existing = [v for _, v in sorted(self.subjects.get(subject, {}).items())]
        for v in existing:
            if not v.deleted and self.schemas[v.schema_id].parsed.identity() == parsed.identity():
                return v.schema_id, []
        live = [self.schemas[v.schema_id].parsed for v in existing if not v.deleted]
        reasons = check(self.level(subject), parsed, live)
        if reasons:
            raise errors.RegistryError(
                errors.INCOMPATIBLE,
                f"Schema being registered is incompatible with an earlier schema for subject "
                f"\"{subject}\", details: {reasons}")
        schema_id = self.ids_by_identity.get(parsed.identity()) or self.max_id + 1
        number = max((v.version for v in existing), default=0) + 1
        value = records.schema_value(subject, number, schema_id, parsed.text, parsed.schema_type,
                                     references, False, parsed.metadata, parsed.rule_set)
        return schema_id, [(records.schema_key(subject, number), value)]

    def _version_record(self, v: Version, deleted: bool) -> Record:
        stored = self.schemas[v.schema_id]
        return (records.schema_key(v.subject, v.version),
                records.schema_value(v.subject, v.version, v.schema_id, stored.parsed.text,
                                     stored.parsed.schema_type, stored.references, deleted,
                                     stored.parsed.metadata, stored.parsed.rule_set))

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        all_versions = self.versions(subject, deleted=True)
        if permanent:
            live = [v for v in all_versions if not v.deleted]
            if live:
                raise errors.RegistryError(
                    errors.SUBJECT_NOT_SOFT_DELETED,
                    f"Subject '{subject}' was not deleted first before being permanently deleted")
            recs: list[Record] = [(records.schema_key(subject, v.version), None)
                                  for v in all_versions]
            recs.append((records.config_key(subject), None))
            return [v.version for v in all_versions], recs
        live = [v for v in all_versions if not v.deleted]
        if not live:
            raise errors.RegistryError(errors.SUBJECT_SOFT_DELETED,
                                       f"Subject '{subject}' was soft deleted.")
        recs = [self._version_record(v, True) for v in live]
        recs.append((records.delete_subject_key(subject),
                     {"subject": subject, "version": live[-1].version}))
        return [v.version for v in live], recs

    def plan_delete_version(self, subject: str, ref: str, permanent: bool
                            ) -> tuple[int, list[Record]]:
        if ref not in ("latest", "-1"):
            parse_version(ref)
        v = self.version(subject, ref, deleted=permanent)
        if permanent:
            if not v.deleted:
                raise errors.RegistryError(
                    errors.SCHEMA_VERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {v.version} was not deleted first before "
                    "being permanently deleted")
            return v.version, [(records.schema_key(subject, v.version), None)]
        return v.version, [self._version_record(v, True)]

    def mode(self, subject: str | None) -> str:
        return self.modes.get(subject) or self.modes.get(None) or "READWRITE"

    def check_writable(self, subject: str | None) -> None:
        if self.mode(subject) == "READONLY":
            raise errors.RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} is in read-only mode" if subject else
                "The registry is in read-only mode")

    def plan_mode(self, subject: str | None, mode: Any) -> tuple[str, list[Record]]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.RegistryError(errors.INVALID_MODE,
                                       f"Invalid mode. Valid values are {', '.join(MODES)}")
        return mode.upper(), [(records.mode_key(subject), {"mode": mode.upper()})]

    def referenced_by(self, subject: str, ref: str) -> list[int]:
        v = self.version(subject, ref)
        return sorted(stored.schema_id for stored in self.schemas.values()
                      if any(r.get("subject") == subject and r.get("version") == v.version
                             for r in stored.references if isinstance(r, dict)))

    def plan_config(self, subject: str | None, level: Any) -> tuple[str, list[Record]]:
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.RegistryError(errors.INVALID_COMPATIBILITY_LEVEL,
                                       f"Invalid compatibility level. Valid values are none, "
                                       f"backward, forward, full, backward_transitive, "
                                       f"forward_transitive, and full_transitive (got {level!r})")
        value = {**self.configs.get(subject, {}), "compatibilityLevel": level.upper()}
        return level.upper(), [(records.config_key(subject), value)]


def extras_of(stored: StoredSchema) -> dict[str, Any]:
    """The optional parts of a schema's answer: references, metadata, ruleSet."""
    out: dict[str, Any] = {}
    if stored.references:
        out["references"] = stored.references
    if stored.parsed.metadata is not None:
        out["metadata"] = stored.parsed.metadata
    if stored.parsed.rule_set is not None:
        out["ruleSet"] = stored.parsed.rule_set
    return out


def parse_version(ref: str) -> int:
    try:
        number = int(ref)
    except ValueError:
        raise errors.invalid_version(ref) from None
    if not 1 <= number <= 2**31 - 1:
        raise errors.invalid_version(ref)
    return number
