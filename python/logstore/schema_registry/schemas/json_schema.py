"""JSON schemas: JSON Schema documents checked against their draft's meta-schema by
`jsonschema` (`$schema` picks drafts 4, 6, 7, 2019-09 or 2020-12; none means draft 7, as in
Confluent), with every `$ref` resolved: `#/...` inside the document, otherwise the name (or
`$id`) of a reference, optionally with a `#/...` fragment.

Canonical text: the document as compact JSON, keys in their given order (Confluent keeps the
parsed JSON node). Normalized: keys sorted at every level.

`JsonNode` is the typed view the compatibility rules compare (everit's schema classes, which
Confluent's rules are written against): "true", "false", "empty", "combined" (allOf, anyOf,
oneOf; also a list of types, and several kinds of keyword in one schema, which make an
allOf), "enum", "const", "not", "object", "array", "string", "number" (`integer` flag),
"boolean", "null".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators

from logstore.schema_registry.errors import InvalidSchemaError
from logstore.schema_registry.schemas import ParsedSchema, ResolvedReference

_OBJECT_KEYS = (
    "properties", "required", "additionalProperties", "patternProperties", "minProperties",
    "maxProperties", "dependencies", "dependentRequired", "dependentSchemas",
    "unevaluatedProperties", "propertyNames",
)  # fmt: skip
_ARRAY_KEYS = (
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "contains", "minContains", "maxContains", "unevaluatedItems",
)  # fmt: skip
_STRING_KEYS = ("minLength", "maxLength", "pattern", "format")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_TYPED = {"object": _OBJECT_KEYS, "array": _ARRAY_KEYS, "string": _STRING_KEYS,
          "number": _NUMBER_KEYS}  # fmt: skip
_COMBINERS = ("allOf", "anyOf", "oneOf")


@dataclass(eq=False)
class JsonNode:
    kind: str
    raw: Any
    doc: Any = None  # the document `raw` belongs to (refs inside resolve against it)
    criterion: str = ""
    subschemas: list[JsonNode] = field(default_factory=list)
    integer: bool = False


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def _pointer(doc: Any, fragment: str) -> Any:
    target = doc
    for part in fragment.lstrip("/").split("/") if fragment.strip("/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise KeyError(fragment)
    return target


class Loader:
    """Builds `JsonNode`s, one per schema object (cached, so recursive schemas are cycles)."""

    def __init__(self, documents: dict[str, Any]) -> None:
        self.documents = documents
        self.cache: dict[int, JsonNode] = {}
        self.keep: list[Any] = []

    def resolve(self, ref: str, doc: Any) -> tuple[Any, Any]:
        base, _, fragment = ref.partition("#")
        target_doc = doc
        if base:
            target_doc = self.documents.get(base)
            if target_doc is None:
                target_doc = self.documents.get(base.rsplit("/", 1)[-1])
            if target_doc is None:
                raise InvalidSchemaError(f"Invalid schema: unresolved $ref '{ref}'")
        try:
            return _pointer(target_doc, fragment), target_doc
        except KeyError:
            raise InvalidSchemaError(f"Invalid schema: unresolved $ref '{ref}'") from None

    def node(self, raw: Any, doc: Any) -> JsonNode:
        seen: set[int] = set()
        while isinstance(raw, dict) and isinstance(raw.get("$ref"), str):
            if id(raw) in seen:
                raise InvalidSchemaError("Invalid schema: $ref resolves to itself")
            seen.add(id(raw))
            raw, doc = self.resolve(raw["$ref"], doc)
        cached = self.cache.get(id(raw))
        if cached is not None:
            return cached
        node = self._build(raw, doc)
        self.cache[id(raw)] = node
        self.keep.append(raw)
        return node

    def _build(self, raw: Any, doc: Any) -> JsonNode:
        if raw is True:
            return JsonNode("true", raw, doc)
        if raw is False:
            return JsonNode("false", raw, doc)
        if not isinstance(raw, dict):
            # only under a keyword the document's draft does not have (its meta-schema
            # checks the rest): no constraint
            return JsonNode("empty", raw, doc)
        parts: list[JsonNode] = []
        typed = self._typed(raw, doc)
        if typed is not None:
            parts.append(typed)
        if "enum" in raw:
            parts.append(JsonNode("enum", raw, doc))
        if "const" in raw:
            parts.append(JsonNode("const", raw, doc))
        if "not" in raw:
            parts.append(JsonNode("not", raw, doc))
        for criterion in _COMBINERS:
            if isinstance(raw.get(criterion), list):
                subs = [self.node(s, doc) for s in raw[criterion]]
                parts.append(JsonNode("combined", raw, doc, criterion=criterion, subschemas=subs))
        if not parts:
            return JsonNode("empty", raw, doc)
        if len(parts) == 1:
            return parts[0]
        return JsonNode("combined", raw, doc, criterion="allOf", subschemas=parts)

    def _typed(self, raw: dict[str, Any], doc: Any) -> JsonNode | None:
        kind = raw.get("type")
        if isinstance(kind, list):
            if len(kind) == 1:
                kind = kind[0]
            else:
                subs = [self._single(str(k), raw, doc) for k in kind]
                return JsonNode("combined", raw, doc, criterion="anyOf", subschemas=subs)
        if isinstance(kind, str):
            return self._single(kind, raw, doc)
        for name, keys in _TYPED.items():
            if any(k in raw for k in keys):
                return self._single(name, raw, doc)
        return None

    @staticmethod
    def _single(kind: str, raw: dict[str, Any], doc: Any) -> JsonNode:
        if kind == "integer":
            return JsonNode("number", raw, doc, integer=True)
        return JsonNode(kind, raw, doc)


def _walk_refs(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            out.append(ref)
        for v in value.values():
            _walk_refs(v, out)
    elif isinstance(value, list):
        for v in value:
            _walk_refs(v, out)


def _documents(references: tuple[ResolvedReference, ...]) -> dict[str, Any]:
    docs: dict[str, Any] = {}
    for ref in references:
        if not isinstance(ref.schema, JsonSchema):
            raise InvalidSchemaError(f"Invalid schema reference {ref.name}: not a JSON schema")
        docs.update(ref.schema.documents)
        docs[ref.name] = ref.schema.json
        if isinstance(ref.schema.json, dict) and isinstance(ref.schema.json.get("$id"), str):
            docs.setdefault(ref.schema.json["$id"], ref.schema.json)
    return docs


class JsonSchema:
    schema_type = "JSON"

    def __init__(self, obj: Any, references: tuple[ResolvedReference, ...]) -> None:
        self.json = obj
        self.references = references
        self.documents = _documents(references)
        self.loader = Loader(self.documents)
        self.root = self.loader.node(obj, obj)

    def canonical(self) -> str:
        return _dump(self.json)

    def formatted(self, fmt: str | None) -> str:
        """The canonical text whatever the format (Confluent has none for JSON)."""
        return self.canonical()

    def normalized(self) -> JsonSchema:
        refs = tuple(sorted(set(self.references), key=lambda r: (r.name, r.subject, r.version)))
        return JsonSchema(_sorted(self.json), refs)

    def deep_equals(self, other: ParsedSchema) -> bool:
        return (
            isinstance(other, JsonSchema)
            and self.canonical() == other.canonical()
            and [r.reference() for r in self.references]
            == [r.reference() for r in other.references]
        )

    def is_backward_compatible(self, previous: ParsedSchema) -> list[str]:
        from logstore.schema_registry.schemas.json_compat import backward_differences

        assert isinstance(previous, JsonSchema)
        return backward_differences(previous.root, previous.loader, self.root, self.loader)

    def __str__(self) -> str:
        return self.canonical()


def parse_json_schema(text: str, references: tuple[ResolvedReference, ...] = ()) -> JsonSchema:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchemaError(f"Invalid schema {text[:200]}: {e}") from None
    if not isinstance(obj, (dict, bool)):
        raise InvalidSchemaError(f"Invalid schema {text[:200]}: not a JSON Schema")
    try:
        validator = jsonschema.validators.validator_for(obj, default=jsonschema.Draft7Validator)
        validator.check_schema(obj)
    except jsonschema.exceptions.SchemaError as e:
        raise InvalidSchemaError(f"Invalid schema {text[:200]}: {e.message}") from None
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    try:
        schema = JsonSchema(obj, references)
        refs: list[str] = []
        _walk_refs(obj, refs)
        for ref in refs:
            schema.loader.resolve(ref, obj)
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    return schema
