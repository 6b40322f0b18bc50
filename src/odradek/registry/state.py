"""The registry's view of `_schemas`: records applied in order, and writes planned as records.

Sans-I/O: the store feeds it the topic's records (apply) and writes the records that the
plan_* methods return. Ids are global: the same schema (type, canonical text, references) gets
the same id in every subject, and a new id is one more than the highest id ever read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from odradek.registry import errors, records
from odradek.registry.compat import DEFAULT_LEVEL, LEVELS, check
from odradek.registry.schemas import ParsedSchema, parse, with_extras

MODES = ("READWRITE", "READONLY", "IMPORT")
PARSE_CACHE = 1024  # parsed request schemas kept
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
        self.ids_by_normal: dict[tuple[Any, ...], int] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0
        self._parsed: OrderedDict[Any, ParsedSchema] = OrderedDict()

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
            self.ids_by_normal.setdefault(parsed.identity(normalized=True), schema_id)
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

    def parse_request(self, body: dict[str, Any], normalize: bool = False) -> ParsedSchema:
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise errors.invalid_schema("references must be a list")
        referenced = self._referenced(refs)
        text, kind = body.get("schema"), body.get("schemaType")
        # Serializers send the same few schemas again and again (lookups, re-registrations):
        # parsing is most of such a request's cost, so recent results are kept. The key holds
        # the referenced schemas themselves, since a subject's version may be deleted and reused.
        key = None
        if isinstance(text, str) and (kind is None or isinstance(kind, str)):
            key = (kind, text, normalize, tuple(
                (r.get("name"), r.get("subject"), r.get("version"), p.schema_type, p.canonical)
                for r, p in zip(refs, referenced, strict=False) if isinstance(r, dict)))
        parsed = self._parsed.get(key) if key is not None else None
        if parsed is None:
            parsed = parse(kind, text, refs, referenced, normalize=normalize)
            if key is not None:
                self._parsed[key] = parsed
                if len(self._parsed) > PARSE_CACHE:
                    self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(key)
        return with_extras(parsed, body.get("metadata"), body.get("ruleSet"))

    def subject_names(self, deleted: bool = False, prefix: str = "",
                      deleted_only: bool = False) -> list[str]:
        if deleted_only:  # subjects whose every version is soft-deleted
            return sorted(s for s, vs in self.subjects.items() if s.startswith(prefix)
                          and vs and all(v.deleted for v in vs.values()))
        return sorted(s for s, vs in self.subjects.items() if s.startswith(prefix)
                      and any(deleted or not v.deleted for v in vs.values()))

    def listing(self, prefix: str = "", deleted: bool = False, latest_only: bool = False
                ) -> list[Version]:
        """Every (subject, version) for `GET /schemas`, by subject then version."""
        out: list[Version] = []
        for subject in self.subject_names(deleted, prefix):
            found = [v for _, v in sorted(self.subjects[subject].items())
                     if deleted or not v.deleted]
            out += found[-1:] if latest_only else found
        return out

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

    def describe(self, v: Version, form: str | None = None) -> dict[str, Any]:
        stored = self.schemas[v.schema_id]
        text = stored.parsed.text
        if form == "serialized" and stored.parsed.schema_type == "PROTOBUF" \
                and stored.parsed.parsed is not None:
            text = stored.parsed.parsed.serialized()
        out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.schema_id,
                               "schema": text}
        if stored.parsed.schema_type != "AVRO":
            out["schemaType"] = stored.parsed.schema_type
        return {**out, **extras_of(stored)}

    def lookup(self, subject: str, parsed: ParsedSchema, deleted: bool = False,
               normalize: bool = False) -> Version:
        live = self.versions(subject, deleted)
        for v in reversed(live):
            if self.schemas[v.schema_id].parsed.identity(normalize) == parsed.identity(normalize):
                return v
        raise errors.schema_not_found()

    # ---- writes, planned as records --------------------------------------------------------
    def plan_register(self, subject: str, parsed: ParsedSchema, references: list[dict[str, Any]],
                      normalize: bool = False, schema_id: Any = None, version: Any = None
                      ) -> tuple[int, list[Record]]:
        """The id the schema gets in `subject`, and the records to write (none if present).

        `schema_id` and `version` are the caller's (IMPORT mode only, as Confluent's)."""
        importing = self.mode(subject) == "IMPORT"
        if (schema_id is not None or version is not None) and not importing:
            raise errors.RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} is not in import mode: an id or version cannot be given")
        existing = [v for _, v in sorted(self.subjects.get(subject, {}).items())]
        for v in existing:
            if not v.deleted and self.schemas[v.schema_id].parsed.identity(normalize) == \
                    parsed.identity(normalize) and schema_id in (None, v.schema_id):
                return v.schema_id, []
        if importing:
            schema_id, number = self._import_slot(subject, parsed, schema_id, version, existing)
        else:
            live = [self.schemas[v.schema_id].parsed for v in existing if not v.deleted]
            reasons = check(self.level(subject), parsed, live)
            if reasons:
                raise errors.RegistryError(
                    errors.INCOMPATIBLE,
                    f"Schema being registered is incompatible with an earlier schema for subject "
                    f"\"{subject}\", details: {reasons}")
            known = self.ids_by_normal if normalize else self.ids_by_identity
            schema_id = known.get(parsed.identity(normalize)) or self.max_id + 1
            number = max((v.version for v in existing), default=0) + 1
        value = records.schema_value(subject, number, schema_id, parsed.text, parsed.schema_type,
                                     references, False, parsed.metadata, parsed.rule_set)
        return schema_id, [(records.schema_key(subject, number), value)]

    def _import_slot(self, subject: str, parsed: ParsedSchema, schema_id: Any, version: Any,
                     existing: list[Version]) -> tuple[int, int]:
        """The (id, version) an imported schema takes; compatibility is not checked."""
        for name, value in (("id", schema_id), ("version", version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 1 <= value <= 2**31 - 1):
                raise errors.RegistryError(errors.INVALID_SCHEMA,
                                           f"Invalid schema: {name} must be an integer in "
                                           f"[1, 2^31-1], got {value!r}")
        if schema_id is None:
            schema_id = self.ids_by_identity.get(parsed.identity()) or self.max_id + 1
        else:
            stored = self.schemas.get(schema_id)
            if stored is not None and stored.parsed.identity() != parsed.identity():
                raise errors.RegistryError(
                    errors.ID_DOES_NOT_MATCH,
                    f"Schema id {schema_id} is already used by another schema; "
                    "overwriting it is not permitted")
        number = version if version is not None else \
            max((v.version for v in existing), default=0) + 1
        if any(v.version == number for v in existing):
            raise errors.RegistryError(
                errors.OPERATION_NOT_PERMITTED,
                f"Subject {subject} already has a version {number}; importing over it is not "
                "permitted")
        return schema_id, number

    def _version_record(self, v: Version, deleted: bool) -> Record:
        stored = self.schemas[v.schema_id]
        return (records.schema_key(v.subject, v.version),
                records.schema_value(v.subject, v.version, v.schema_id, stored.parsed.text,
                                     stored.parsed.schema_type, stored.references, deleted,
                                     stored.parsed.metadata, stored.parsed.rule_set))

    def _check_unreferenced(self, subject: str, versions: list[Version], permanent: bool) -> None:
        # Live users block a soft delete; a permanent one is blocked by soft-deleted users too.
        for v in versions:
            users = self._users(subject, v.version, permanent)
            if users:
                raise errors.RegistryError(
                    errors.REFERENCE_EXISTS,
                    f"One or more references exist to the schema {{subject={subject}, "
                    f"version={v.version}}}: schema ids {users}")

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[int], list[Record]]:
        all_versions = self.versions(subject, deleted=True)
        self._check_unreferenced(subject, all_versions, permanent)
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
        self._check_unreferenced(subject, [v], permanent)
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

    def plan_mode(self, subject: str | None, mode: Any, force: bool = False
                  ) -> tuple[str, list[Record]]:
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.RegistryError(errors.INVALID_MODE,
                                       f"Invalid mode. Valid values are {', '.join(MODES)}")
        mode = mode.upper()
        if mode == "IMPORT" and not force and self.mode(subject) != "IMPORT":
            # Imported ids must not collide with ids this registry already gave (Confluent's rule).
            # Soft-deleted versions count: their ids are still taken.
            every = self.subject_names(deleted=True)
            taken = every if subject is None else [s for s in every if s == subject]
            if taken:
                raise errors.RegistryError(
                    errors.OPERATION_NOT_PERMITTED,
                    f"Cannot import since found existing subjects {taken[:5]}; "
                    "use force=true to override")
        return mode, [(records.mode_key(subject), {"mode": mode})]

    def plan_delete_mode(self, subject: str) -> tuple[str, list[Record]]:
        if subject not in self.modes:
            raise errors.subject_not_found(subject)
        return self.modes[subject], [(records.mode_key(subject), None)]

    def referenced_by(self, subject: str, ref: str, deleted: bool = False) -> list[int]:
        return self._users(subject, self.version(subject, ref, deleted=deleted).version, deleted)

    def _users(self, subject: str, number: int, deleted: bool) -> list[int]:
        users = {(use.subject, use.version): use.schema_id
                 for versions in self.subjects.values() for use in versions.values()
                 if deleted or not use.deleted}
        return sorted({schema_id for (s, n), schema_id in users.items()
                       if any(r.get("subject") == subject and r.get("version") == number
                              for r in self.schemas[schema_id].references
                              if isinstance(r, dict))})

    def plan_config(self, subject: str | None, level: Any, normalize: Any = None
                    ) -> tuple[dict[str, Any], list[Record]]:
        """`PUT /config`: the compatibility level and/or the `normalize` default."""
        if normalize is not None and not isinstance(normalize, bool):
            raise errors.RegistryError(errors.INVALID_COMPATIBILITY_LEVEL,
                                       f"normalize must be true or false (got {normalize!r})")
        if (level is not None or normalize is None) and (
                not isinstance(level, str) or level.upper() not in LEVELS):
            raise errors.RegistryError(errors.INVALID_COMPATIBILITY_LEVEL,
                                       f"Invalid compatibility level. Valid values are none, "
                                       f"backward, forward, full, backward_transitive, "
                                       f"forward_transitive, and full_transitive (got {level!r})")
        value = dict(self.configs.get(subject, {}))
        answer: dict[str, Any] = {}
        if level is not None:
            value["compatibilityLevel"] = answer["compatibility"] = level.upper()
        if normalize is not None:
            value["normalize"] = answer["normalize"] = normalize
        return answer, [(records.config_key(subject), value)]

    def normalize_default(self, subject: str | None) -> bool:
        """The `normalize` config of the subject, else the global one (false when unset)."""
        for key in (subject, None):
            config = self.configs.get(key)
            if config and isinstance(config.get("normalize"), bool):
                return bool(config["normalize"])
        return False


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
