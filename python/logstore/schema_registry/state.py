"""The registry's in-memory state, a pure model rebuilt by replaying `_schemas`.

`RegistryState.apply(key, value)` folds one record in; the `plan_*` methods check a write
against the state and return the records that make it, without changing the state: the
primary writes them to `_schemas` and every instance (the primary too) changes its state only
by reading them back. So a replay of the topic and the state after the same calls are equal.

Invariants: a schema id names one schema (type, text, references) for ever; a new schema
gets `max id ever seen + 1` unless the same schema already has an id (in any subject, deleted
or not), which it reuses; a subject's new version is its highest version (deleted ones
included) + 1. Soft-deleted versions stay, flagged; permanent deletes are tombstones and must
follow a soft delete.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from logstore.schema_registry import errors
from logstore.schema_registry.records import (
    ClearSubjectValue,
    ConfigValue,
    DeleteSubjectValue,
    Key,
    ModeValue,
    Record,
    SchemaRef,
    SchemaValue,
    Value,
)

DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")

SchemaIdentity = tuple[str, str, tuple[SchemaRef, ...]]


def identity(schema_type: str, text: str, refs: Iterable[SchemaRef]) -> SchemaIdentity:
    return (schema_type, text, tuple(refs))


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    configs: dict[str | None, ConfigValue] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    # id -> the schema it names, and the reverse, over every SCHEMA record still stored
    by_id: dict[int, SchemaValue] = field(default_factory=dict)
    ids: dict[SchemaIdentity, int] = field(default_factory=dict)

    # -- replay ---------------------------------------------------------------------------

    def apply(self, key: Key, value: Value | None) -> None:
        kt = key.keytype
        if kt == "SCHEMA" and key.subject is not None and key.version is not None:
            versions = self.subjects.setdefault(key.subject, {})
            if isinstance(value, SchemaValue):
                versions[key.version] = value
                self.max_id = max(self.max_id, value.id)
                ident = identity(value.schema_type, value.schema, value.references)
                self.by_id.setdefault(value.id, value)
                self.ids.setdefault(ident, value.id)
            elif value is None:
                old = versions.pop(key.version, None)
                if not versions:
                    del self.subjects[key.subject]
                if old is not None:
                    self._forget_id(old.id)
        elif kt == "CONFIG":
            if isinstance(value, ConfigValue):
                self.configs[key.subject] = value
            elif value is None:
                self.configs.pop(key.subject, None)
        elif kt == "MODE":
            if isinstance(value, ModeValue):
                self.modes[key.subject] = value.mode
            elif value is None:
                self.modes.pop(key.subject, None)
        elif kt == "DELETE_SUBJECT" and isinstance(value, DeleteSubjectValue):
            versions = self.subjects.get(value.subject, {})
            for v, sv in versions.items():
                if v <= value.version and not sv.deleted:
                    versions[v] = dataclasses.replace(sv, deleted=True)
        elif kt == "CLEAR_SUBJECT" and isinstance(value, ClearSubjectValue):
            versions = self.subjects.get(value.subject, {})
            for v in [v for v, sv in versions.items() if sv.deleted]:
                self.apply(Key("SCHEMA", value.subject, v), None)

    def _forget_id(self, schema_id: int) -> None:
        for versions in self.subjects.values():
            for sv in versions.values():
                if sv.id == schema_id:
                    return
        old = self.by_id.pop(schema_id, None)
        if old is not None:
            self.ids.pop(identity(old.schema_type, old.schema, old.references), None)

    def apply_all(self, records: Iterable[Record]) -> None:
        for key, value in records:
            self.apply(key, value)

    # -- reads ----------------------------------------------------------------------------

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(
            s
            for s, vs in self.subjects.items()
            if any(deleted or not v.deleted for v in vs.values())
        )

    def _versions(self, subject: str, deleted: bool) -> dict[int, SchemaValue]:
        versions = self.subjects.get(subject)
        if not versions:
            raise errors.SubjectNotFoundError(f"Subject '{subject}' not found.")
        live = {v: sv for v, sv in versions.items() if deleted or not sv.deleted}
        if not live:
            raise errors.SubjectNotFoundError(f"Subject '{subject}' not found.")
        return live

    def version_numbers(self, subject: str, deleted: bool = False) -> list[int]:
        return sorted(self._versions(subject, deleted))

    def get_version(self, subject: str, version: int | str, deleted: bool = False) -> SchemaValue:
        """`version` is a number, -1 or "latest"."""
        live = self._versions(subject, deleted)
        if version in ("latest", -1):
            return live[max(live)]
        assert isinstance(version, int)
        sv = live.get(version)
        if sv is None:
            raise errors.VersionNotFoundError(f"Version {version} not found.")
        return sv

    def schema_by_id(self, schema_id: int) -> SchemaValue:
        sv = self.by_id.get(schema_id)
        if sv is None:
            raise errors.SchemaNotFoundError(f"Schema {schema_id} not found")
        return sv

    def usages(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) pairs registering schema `schema_id`, sorted."""
        self.schema_by_id(schema_id)
        return sorted(
            (s, v)
            for s, vs in self.subjects.items()
            for v, sv in vs.items()
            if sv.id == schema_id and (deleted or not sv.deleted)
        )

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted(
            {
                sv.id
                for vs in self.subjects.values()
                for sv in vs.values()
                if not sv.deleted
                and any(r.subject == subject and r.version == version for r in sv.references)
            }
        )

    def find(
        self, subject: str, ident: SchemaIdentity, deleted: bool = False
    ) -> SchemaValue | None:
        """The version of `subject` holding schema `ident`, newest first."""
        for v in sorted(self.subjects.get(subject, {}), reverse=True):
            sv = self.subjects[subject][v]
            if (deleted or not sv.deleted) and identity(
                sv.schema_type, sv.schema, sv.references
            ) == ident:
                return sv
        return None

    def compatibility(self, subject: str | None) -> str:
        cfg = self.configs.get(subject) if subject is not None else None
        if cfg is None:
            cfg = self.configs.get(None)
        return cfg.compatibility if cfg is not None else DEFAULT_COMPATIBILITY

    def normalize(self, subject: str | None) -> bool:
        for s in (subject, None):
            cfg = self.configs.get(s)
            if cfg is not None and cfg.normalize is not None:
                return cfg.normalize
        return False

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)

    def schema_count(self) -> int:
        return len(self.by_id)

    # -- writes: each returns the records that make it ------------------------------------

    def check_writable(self, subject: str | None) -> None:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            where = f"Subject {subject}" if subject is not None else "The registry"
            raise errors.OperationNotPermittedError(f"{where} is in read-only mode")

    def plan_register(
        self,
        subject: str,
        schema_type: str,
        text: str,
        refs: tuple[SchemaRef, ...] = (),
        schema_id: int | None = None,
        version: int | None = None,
    ) -> tuple[list[Record], int]:
        """Records registering a schema not yet live in `subject`, and its id.

        `schema_id`/`version` are given only in IMPORT mode, which keeps them.
        """
        self.check_writable(subject)
        ident = identity(schema_type, text, refs)
        importing = self.mode(subject) == "IMPORT"
        if (schema_id is not None or version is not None) and not importing:
            raise errors.OperationNotPermittedError(
                "Subject mode must be IMPORT to register with an id or version"
            )
        if schema_id is not None:
            if schema_id < 1:
                raise errors.InvalidSchemaError(f"Invalid schema id {schema_id}")
            existing = self.by_id.get(schema_id)
            if (
                existing is not None
                and identity(existing.schema_type, existing.schema, existing.references) != ident
            ):
                raise errors.OperationNotPermittedError(
                    f"Overwrite new schema with id {schema_id} is not permitted."
                )
        else:
            schema_id = self.ids.get(ident, self.max_id + 1)
        versions = self.subjects.get(subject, {})
        if version is None:
            version = max(versions, default=0) + 1
        elif version < 1:
            raise errors.InvalidVersionError(f"The specified version '{version}' is not valid.")
        elif version in versions:
            raise errors.OperationNotPermittedError(
                f"Overwrite new schema with version {version} is not permitted."
            )
        value = SchemaValue(subject, version, schema_id, text, schema_type, refs)
        return [(Key("SCHEMA", subject, version), value)], schema_id

    def plan_delete_version(
        self, subject: str, version: int | str, permanent: bool
    ) -> tuple[list[Record], int]:
        self.check_writable(subject)
        sv = self.get_version(subject, version, deleted=True)
        if version in ("latest", -1) and not permanent:
            sv = self.get_version(subject, version, deleted=False)
        key = Key("SCHEMA", subject, sv.version)
        if self.referenced_by(subject, sv.version):
            raise errors.ReferenceExistsError(
                f"One or more references exist to the schema {{subject={subject},"
                f"version={sv.version}}}."
            )
        if permanent:
            if not sv.deleted:
                raise errors.SchemaVersionNotSoftDeletedError(
                    f"Subject '{subject}' Version {sv.version} was not deleted first before"
                    " being permanently deleted"
                )
            return [(key, None)], sv.version
        if sv.deleted:
            raise errors.SchemaVersionSoftDeletedError(
                f"Subject '{subject}' Version {sv.version} was soft deleted. Set"
                " permanent=true to delete permanently"
            )
        return [(key, dataclasses.replace(sv, deleted=True))], sv.version

    def plan_delete_subject(self, subject: str, permanent: bool) -> tuple[list[Record], list[int]]:
        self.check_writable(subject)
        versions = self.subjects.get(subject)
        if not versions:
            raise errors.SubjectNotFoundError(f"Subject '{subject}' not found.")
        for v, sv in versions.items():
            if not sv.deleted and self.referenced_by(subject, v):
                raise errors.ReferenceExistsError(
                    f"One or more references exist to the schema {{subject={subject},version={v}}}."
                )
        live = sorted(v for v, sv in versions.items() if not sv.deleted)
        if permanent:
            if live:
                raise errors.SubjectNotSoftDeletedError(
                    f"Subject '{subject}' was not deleted first before being permanently deleted"
                )
            return [(Key("SCHEMA", subject, v), None) for v in sorted(versions)], sorted(versions)
        if not live:
            raise errors.SubjectSoftDeletedError(
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently"
            )
        records: list[Record] = [
            (Key("DELETE_SUBJECT", subject), DeleteSubjectValue(subject, max(versions)))
        ]
        if subject in self.configs:
            records.append((Key("CONFIG", subject), None))
        if subject in self.modes:
            records.append((Key("MODE", subject), None))
        return records, live

    def plan_config(
        self, subject: str | None, compatibility: str, normalize: bool | None
    ) -> list[Record]:
        return [(Key("CONFIG", subject), ConfigValue(compatibility, normalize))]

    def plan_delete_config(self, subject: str | None) -> list[Record]:
        if subject is not None and subject not in self.configs:
            raise errors.SubjectCompatibilityNotConfiguredError(
                f"Subject '{subject}' does not have subject-level compatibility configured"
            )
        return [(Key("CONFIG", subject), None)]

    def plan_mode(self, subject: str | None, mode: str, force: bool = False) -> list[Record]:
        if mode not in MODES:
            raise errors.InvalidModeError(
                "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE, IMPORT: "
                f"{mode}"
            )
        if mode == "IMPORT" and not force:
            has = (
                self.subject_names()
                if subject is None
                else ([subject] if subject in self.subject_names() else [])
            )
            if has:
                raise errors.OperationNotPermittedError(
                    "Cannot import since found existing subjects"
                )
        return [(Key("MODE", subject), ModeValue(mode))]

    def plan_delete_mode(self, subject: str) -> list[Record]:
        if subject not in self.modes:
            raise errors.SubjectModeNotConfiguredError(
                f"Subject '{subject}' does not have subject-level mode configured"
            )
        return [(Key("MODE", subject), None)]
