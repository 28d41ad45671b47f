"""The registry's schema types (AVRO, JSON, PROTOBUF) and their compatibility checks, sans-IO.

The contract the REST layer codes against:

- `parse_schema(schema_type, text, references)` parses a schema as its type and returns a
  `ParsedSchema`; anything unparsable, and a reference the schema needs but is not given,
  raises `InvalidSchemaError` (42201). `references` are already resolved: each carries the
  referenced schema, itself parsed with its own references. `resolve_references` builds them
  from the store through a lookup callable and refuses cycles and missing versions.
- `ParsedSchema.canonical()` is the text the registry stores and serves (as Confluent's
  `canonicalString`: Avro's `Schema.toString()` layout, JSON Schema's JSON compacted; a
  `.proto` file printed back by proto-schema-parser's generator); `normalized()` is the
  schema under `normalize=true`; `deep_equals` decides that a schema is already registered
  (same id across subjects).
- Cost: parsing is CPU work on the caller's thread, linear in the text: about 30 us a byte
  for PROTOBUF (the grammar runs in pure Python), about 10 us a byte for JSON (the
  meta-schema check), less for AVRO. A caller on an event loop parses large schemas off it.
- `ParsedSchema.formatted(fmt)` answers `?format=` (PROTOBUF `serialized`: the base64
  `FileDescriptorProto` Confluent's Protobuf deserializers ask for). A PROTOBUF schema may
  also be registered as such a base64 descriptor (Confluent's serializers do); it is
  stored as `.proto` text.
- `check_compatibility(level, new, previous, previous_versions=())` returns `[]` when
  compatible, else Confluent's verbose messages. `previous` is newest first; the
  non-transitive levels look only at `previous[0]`, the transitive ones at each in turn and
  stop at the first incompatible one. `previous_versions` (optional, same order) adds
  Confluent's `{oldSchemaVersion: N}` line; the caller appends `{validateFields: ...,
  compatibility: ...}` as Confluent's registry does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from logstore.schema_registry.errors import InvalidSchemaError

SCHEMA_TYPES = ("AVRO", "JSON", "PROTOBUF")
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
# Confluent cuts the old schema it quotes in a message at this many characters.
MAX_SCHEMA_IN_MESSAGE = 10 * 1024
DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"


@dataclass(frozen=True, order=True)
class Reference:
    """A reference as Confluent's API carries it: `{"name", "subject", "version"}`."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class ResolvedReference:
    """A reference with the schema it names, parsed (with that schema's own references)."""

    name: str
    subject: str
    version: int
    schema: ParsedSchema

    def reference(self) -> Reference:
        return Reference(self.name, self.subject, self.version)


class ParsedSchema(Protocol):
    schema_type: str
    references: tuple[ResolvedReference, ...]

    def canonical(self) -> str: ...

    def normalized(self) -> ParsedSchema: ...

    def deep_equals(self, other: ParsedSchema) -> bool: ...

    def formatted(self, fmt: str | None) -> str:
        """The text `?format=` asks for: PROTOBUF `serialized` (base64 FileDescriptorProto,
        what Confluent's Protobuf deserializers ask for), AVRO `resolved` (references
        inlined); the canonical text otherwise."""
        ...

    def is_backward_compatible(self, previous: ParsedSchema) -> list[str]:
        """Messages (`%s` placeholders for reader and writer) why `self` cannot read data
        written with `previous`; [] when it can (Confluent's `isBackwardCompatible`)."""
        ...


# Parsed schemas without references are kept, up to this many texts of at most this size:
# a registry parses the same stored schemas again for each compatibility check.
PARSE_CACHE_ENTRIES = 512
PARSE_CACHE_MAX_TEXT = 64 * 1024


def parse_schema(
    schema_type: str, text: str, references: Sequence[ResolvedReference] = ()
) -> ParsedSchema:
    """Parses `text` as a schema of `schema_type` (None or "" means AVRO, as in Confluent).
    A schema without references and of at most PARSE_CACHE_MAX_TEXT characters may come
    from a cache: the same object for the same text (parsed schemas are not changed)."""
    kind = (schema_type or "AVRO").upper()
    refs = tuple(references)
    if not refs and len(text) <= PARSE_CACHE_MAX_TEXT:
        return _parse_cached(kind, text)
    return _parse(kind, text, refs)


def _parse(kind: str, text: str, refs: tuple[ResolvedReference, ...]) -> ParsedSchema:
    if kind == "AVRO":
        from logstore.schema_registry.schemas.avro import parse_avro

        return parse_avro(text, refs)
    if kind == "JSON":
        from logstore.schema_registry.schemas.json_schema import parse_json_schema

        return parse_json_schema(text, refs)
    if kind == "PROTOBUF":
        from logstore.schema_registry.schemas.protobuf import parse_protobuf

        return parse_protobuf(text, refs)
    raise InvalidSchemaError(f"Invalid schema type {kind}")


@functools.lru_cache(maxsize=PARSE_CACHE_ENTRIES)
def _parse_cached(kind: str, text: str) -> ParsedSchema:
    return _parse(kind, text, ())


# What a lookup of (subject, version) answers: the schema's type, text and references.
StoredSchema = tuple[str, str, Sequence[Reference]]


def resolve_references(
    references: Sequence[Reference],
    lookup: Callable[[str, int], StoredSchema | None],
    max_depth: int = 100,
) -> tuple[ResolvedReference, ...]:
    """Resolves and parses `references` depth first through `lookup(subject, version)`
    (None: no such version). A cycle, a missing version or a chain deeper than `max_depth`
    raises InvalidSchemaError."""
    cache: dict[tuple[str, int], ParsedSchema] = {}

    def resolve(
        refs: Sequence[Reference], path: tuple[tuple[str, int], ...]
    ) -> tuple[ResolvedReference, ...]:
        if len(path) > max_depth:
            raise InvalidSchemaError(f"Schema references nest deeper than {max_depth}")
        out = []
        for ref in refs:
            key = (ref.subject, ref.version)
            if key in path:
                raise InvalidSchemaError(
                    f"Circular reference to subject {ref.subject} version {ref.version}"
                )
            parsed = cache.get(key)
            if parsed is None:
                stored = lookup(ref.subject, ref.version)
                if stored is None:
                    raise InvalidSchemaError(
                        f"Invalid schema reference {ref.name}: subject {ref.subject} "
                        f"version {ref.version} not found"
                    )
                kind, text, nested = stored
                parsed = parse_schema(kind, text, resolve(nested, (*path, key)))
                cache[key] = parsed
            out.append(ResolvedReference(ref.name, ref.subject, ref.version, parsed))
        return tuple(out)

    return resolve(references, ())


def _format(
    messages: list[str], reader: str, writer: str, old: ParsedSchema, version: int | None
) -> list[str]:
    if not messages:
        return []
    out = [m.replace("%s", reader, 1).replace("%s", writer, 1) for m in messages]
    if version is not None:
        out.append(f"{{oldSchemaVersion: {version}}}")
    text = old.canonical()
    if len(text) <= MAX_SCHEMA_IN_MESSAGE:
        out.append(f"{{oldSchema: '{text}'}}")
    else:
        out.append(f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_IN_MESSAGE]}...'}}")
    return out


def _check_one(
    direction: str, new: ParsedSchema, old: ParsedSchema, version: int | None
) -> list[str]:
    if new.schema_type != old.schema_type:
        return [DIFFERENT_SCHEMA_TYPE]
    if direction == "BACKWARD":
        return _format(new.is_backward_compatible(old), "new", "old", old, version)
    if direction == "FORWARD":
        return _format(old.is_backward_compatible(new), "old", "new", old, version)
    forward = old.is_backward_compatible(new)
    forward = [m.replace("%s", "old", 1).replace("%s", "new", 1) for m in forward]
    return forward + _format(new.is_backward_compatible(old), "new", "old", old, version)


def check_compatibility(
    level: str,
    new: ParsedSchema,
    previous: Sequence[ParsedSchema],
    previous_versions: Sequence[int] = (),
) -> list[str]:
    """Confluent's compatibility check of `new` against `previous` (newest first)."""
    if level not in COMPATIBILITY_LEVELS:
        raise ValueError(f"Invalid compatibility level {level}")
    if level == "NONE" or not previous:
        return []
    direction = level.removesuffix("_TRANSITIVE")
    olds = previous if level.endswith("_TRANSITIVE") else previous[:1]
    for i, old in enumerate(olds):
        version = previous_versions[i] if i < len(previous_versions) else None
        messages = _check_one(direction, new, old, version)
        if messages:
            return messages
    return []


__all__ = [
    "COMPATIBILITY_LEVELS",
    "SCHEMA_TYPES",
    "ParsedSchema",
    "Reference",
    "ResolvedReference",
    "StoredSchema",
    "check_compatibility",
    "parse_schema",
    "resolve_references",
]
