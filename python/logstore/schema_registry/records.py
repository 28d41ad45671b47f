"""The records of the `_schemas` topic: Confluent Schema Registry's key and value JSON.

Every key is a JSON object naming its `keytype`; the value is JSON or null (a tombstone, so
compaction forgets the key). Field order follows Confluent's serializers, so a record written
here is byte for byte the record Confluent writes for the same state:

    SCHEMA          {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
                    {"subject":S,"version":V,"id":I,["schemaType":T,]["references":[..],]
                     "schema":TEXT,"deleted":B}      (schemaType absent for AVRO)
    CONFIG          {"keytype":"CONFIG","subject":S|null,"magic":0}
                    {"compatibilityLevel":L[,"normalize":B]}
    MODE            {"keytype":"MODE","subject":S|null,"magic":0}  {"mode":M}
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}
                    {"subject":S,"version":V}  (versions up to V are soft-deleted)
    CLEAR_SUBJECT   {"keytype":"CLEAR_SUBJECT","subject":S,"magic":0}  {"subject":S}
    NOOP            {"keytype":"NOOP","magic":0}   (written by the primary to find the end)

A null subject in CONFIG and MODE is the global setting. Reading accepts any field order and
ignores unknown fields (Confluent's newer `metadata`, `ruleSet`, `md5`, ...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEY_TYPES = ("SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")


class RecordFormatError(ValueError):
    """A `_schemas` record that is not Confluent's JSON; the reader skips it."""


@dataclass(frozen=True, order=True)
class Key:
    keytype: str
    subject: str | None = None
    version: int | None = None

    def encode(self) -> bytes:
        if self.keytype == "SCHEMA":
            doc: dict[str, Any] = {
                "keytype": "SCHEMA",
                "subject": self.subject,
                "version": self.version,
                "magic": 1,
            }
        elif self.keytype == "NOOP":
            doc = {"keytype": "NOOP", "magic": 0}
        else:
            doc = {"keytype": self.keytype, "subject": self.subject, "magic": 0}
        return _dump(doc)


@dataclass(frozen=True)
class SchemaRef:
    """A reference as stored and served: {"name","subject","version"}."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaRef, ...] = field(default=())
    deleted: bool = False

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            doc["schemaType"] = self.schema_type
        if self.references:
            doc["references"] = [r.to_json() for r in self.references]
        doc["schema"] = self.schema
        doc["deleted"] = self.deleted
        return _dump(doc)


@dataclass(frozen=True)
class ConfigValue:
    compatibility: str
    normalize: bool | None = None

    def encode(self) -> bytes:
        doc: dict[str, Any] = {"compatibilityLevel": self.compatibility}
        if self.normalize is not None:
            doc["normalize"] = self.normalize
        return _dump(doc)


@dataclass(frozen=True)
class ModeValue:
    mode: str

    def encode(self) -> bytes:
        return _dump({"mode": self.mode})


@dataclass(frozen=True)
class DeleteSubjectValue:
    subject: str
    version: int

    def encode(self) -> bytes:
        return _dump({"subject": self.subject, "version": self.version})


@dataclass(frozen=True)
class ClearSubjectValue:
    subject: str

    def encode(self) -> bytes:
        return _dump({"subject": self.subject})


Value = SchemaValue | ConfigValue | ModeValue | DeleteSubjectValue | ClearSubjectValue
Record = tuple[Key, Value | None]


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def _load(raw: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise RecordFormatError("not a JSON object")
    return doc


def _str(doc: dict[str, Any], name: str, *, nullable: bool = False) -> Any:
    v = doc.get(name)
    if v is None and nullable:
        return None
    if not isinstance(v, str):
        raise RecordFormatError(f"{name} is not a string")
    return v


def _int(doc: dict[str, Any], name: str) -> int:
    v = doc.get(name)
    if not isinstance(v, int) or isinstance(v, bool):
        raise RecordFormatError(f"{name} is not an integer")
    return v


def decode_key(raw: bytes) -> Key:
    doc = _load(raw)
    keytype = doc.get("keytype")
    if keytype not in KEY_TYPES:
        raise RecordFormatError(f"unknown keytype {keytype!r}")
    if keytype == "NOOP":
        return Key("NOOP")
    if keytype == "SCHEMA":
        return Key("SCHEMA", _str(doc, "subject"), _int(doc, "version"))
    nullable = keytype in ("CONFIG", "MODE")
    return Key(keytype, _str(doc, "subject", nullable=nullable))


def decode_value(key: Key, raw: bytes | None) -> Value | None:
    """The value of `key`'s record; None for a tombstone (and for NOOP's empty value)."""
    if raw is None or key.keytype == "NOOP":
        return None
    doc = _load(raw)
    if key.keytype == "SCHEMA":
        refs = doc.get("references") or []
        if not isinstance(refs, list):
            raise RecordFormatError("references is not a list")
        return SchemaValue(
            subject=_str(doc, "subject"),
            version=_int(doc, "version"),
            id=_int(doc, "id"),
            schema=_str(doc, "schema"),
            schema_type=_str(doc, "schemaType", nullable=True) or "AVRO",
            references=tuple(
                SchemaRef(_str(r, "name"), _str(r, "subject"), _int(r, "version"))
                for r in refs
                if isinstance(r, dict)
            ),
            deleted=bool(doc.get("deleted", False)),
        )
    if key.keytype == "CONFIG":
        norm = doc.get("normalize")
        return ConfigValue(
            _str(doc, "compatibilityLevel"), norm if isinstance(norm, bool) else None
        )
    if key.keytype == "MODE":
        return ModeValue(_str(doc, "mode"))
    if key.keytype == "DELETE_SUBJECT":
        return DeleteSubjectValue(_str(doc, "subject"), _int(doc, "version"))
    return ClearSubjectValue(_str(doc, "subject"))


def encode_record(key: Key, value: Value | None) -> tuple[bytes, bytes | None]:
    return key.encode(), (None if value is None else value.encode())
