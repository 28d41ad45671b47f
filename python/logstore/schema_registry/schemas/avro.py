"""AVRO schemas: validated by fastavro, held as a graph of nodes (named types shared, so a
recursive record is a cycle), printed the way Avro's Java `Schema.toString()` prints them.

Canonical text (what Confluent stores): compact JSON, keys in Avro's order. A record is
`{"type","name","namespace"?,"doc"?,"fields",<props>,"aliases"?}` with `namespace` only where
it differs from the enclosing one; a field `{"name","type","doc"?,"default"?,"order"?
(when not ascending),"aliases"?,<props>}`; an enum `{"type","name","namespace"?,"doc"?,
"symbols","default"?,<props>,"aliases"?}`; a fixed `{...,"size",<props>,"aliases"?}`; a
primitive without properties is its name as a string. A named type already printed, or
defined by a reference, is printed as its name (short when in the enclosing namespace).

Normalized text (Confluent's `toNormalizedString`): Avro's parsing canonical form kept
faithful: `{"name":<full>,"type":...}` first, field `"order"` always, docs, sorted aliases,
defaults and properties sorted by key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fastavro.schema import parse_schema as fastavro_parse

from logstore.schema_registry.errors import InvalidSchemaError
from logstore.schema_registry.schemas import ParsedSchema, ResolvedReference

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")
# Attributes Avro reads itself; every other key of a schema object is a property.
_RESERVED = {
    "type", "name", "namespace", "fields", "items", "values", "symbols", "size", "doc",
    "default", "aliases", "order",
}  # fmt: skip
_FIELD_RESERVED = {"name", "type", "doc", "default", "order", "aliases"}
_MISSING: Any = object()
# Deeper schemas are refused: the checks recurse once or twice per level.
MAX_NESTING = 200


@dataclass(eq=False)
class AvroField:
    name: str
    type: AvroNode
    doc: str | None = None
    default: Any = _MISSING
    order: str = "ascending"
    aliases: tuple[str, ...] = ()
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def has_default(self) -> bool:
        return self.default is not _MISSING


@dataclass(eq=False)
class AvroNode:
    """One schema: `type` is a primitive name, "record"/"error", "enum", "fixed", "array",
    "map" or "union". Named types carry `fullname`; `space` is their namespace or None."""

    type: str
    props: dict[str, Any] = field(default_factory=dict)
    fullname: str = ""
    space: str | None = None
    doc: str | None = None
    aliases: tuple[str, ...] = ()
    fields: list[AvroField] = field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    size: int = 0
    items: AvroNode | None = None
    values: AvroNode | None = None
    branches: list[AvroNode] = field(default_factory=list)

    @property
    def kind(self) -> str:
        """The Avro type ("error" is a record)."""
        return "record" if self.type == "error" else self.type

    @property
    def name(self) -> str:
        return self.fullname.rsplit(".", 1)[-1]


def _full(name: str, space: str | None) -> tuple[str, str | None]:
    if "." in name:
        return name, name.rsplit(".", 1)[0]
    return (f"{space}.{name}" if space else name), (space or None)


class _Builder:
    """Builds nodes from parsed JSON, resolving names against `known` (references' types
    and those already defined)."""

    def __init__(self, known: dict[str, AvroNode]) -> None:
        self.known = dict(known)
        self.defined: dict[str, AvroNode] = {}

    def build(self, obj: Any, space: str | None) -> AvroNode:
        if isinstance(obj, str):
            if obj in PRIMITIVES:
                return AvroNode(obj)
            full = obj if "." in obj else (f"{space}.{obj}" if space else obj)
            for candidate in (full, obj):
                if candidate in self.known:
                    return self.known[candidate]
            raise InvalidSchemaError(f"Invalid schema: unknown type {obj}")
        if isinstance(obj, list):
            return AvroNode("union", branches=[self.build(b, space) for b in obj])
        if not isinstance(obj, dict):
            raise InvalidSchemaError(f"Invalid schema: {obj!r} is not a schema")
        kind = obj.get("type")
        if isinstance(kind, (dict, list)):
            return self.build(kind, space)
        props = {k: v for k, v in obj.items() if k not in _RESERVED}
        if kind in PRIMITIVES:
            return AvroNode(str(kind), props=props)
        if kind == "array":
            return AvroNode("array", props=props, items=self.build(obj["items"], space))
        if kind == "map":
            return AvroNode("map", props=props, values=self.build(obj["values"], space))
        if kind not in NAMED:
            if isinstance(kind, str):
                return self.build(kind, space)
            raise InvalidSchemaError(f"Invalid schema: type {kind!r}")
        ns = obj.get("namespace")
        fullname, own_space = _full(str(obj["name"]), ns if ns is not None else space)
        if ns == "" and "." not in str(obj["name"]):
            fullname, own_space = str(obj["name"]), None
        node = AvroNode(
            str(kind),
            props=props,
            fullname=fullname,
            space=own_space,
            doc=obj.get("doc"),
            aliases=tuple(_full(a, own_space)[0] for a in obj.get("aliases", ())),
        )
        self.known[fullname] = node
        self.defined[fullname] = node
        if kind == "enum":
            node.symbols = tuple(obj["symbols"])
            if len(set(node.symbols)) != len(node.symbols):
                raise InvalidSchemaError(f"Invalid schema: duplicate symbols in {fullname}")
            node.enum_default = obj.get("default")
        elif kind == "fixed":
            node.size = int(obj["size"])
        else:
            if not isinstance(obj.get("fields"), list):
                raise InvalidSchemaError(f"Invalid schema: record {fullname} has no fields")
            if len({f.get("name") for f in obj["fields"]}) != len(obj["fields"]):
                raise InvalidSchemaError(f"Invalid schema: duplicate field in {fullname}")
            for f in obj["fields"]:
                node.fields.append(
                    AvroField(
                        name=f["name"],
                        type=self.build(f["type"], own_space),
                        doc=f.get("doc"),
                        default=f.get("default", _MISSING),
                        order=f.get("order", "ascending"),
                        aliases=tuple(f.get("aliases", ())),
                        props={k: v for k, v in f.items() if k not in _FIELD_RESERVED},
                    )
                )
        return node


def _dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class _Printer:
    """Avro's `Schema.toString()` layout (see the module docstring)."""

    def __init__(self, known: set[str]) -> None:
        self.written = set(known)
        self.out: list[str] = []

    def node(self, n: AvroNode, space: str | None) -> None:
        w = self.out.append
        if n.type in PRIMITIVES:
            if not n.props:
                w(_dump(n.type))
            else:
                w('{"type":' + _dump(n.type) + self._props(n.props) + "}")
            return
        if n.type == "union":
            w("[")
            for i, b in enumerate(n.branches):
                if i:
                    w(",")
                self.node(b, space)
            w("]")
            return
        if n.type in ("array", "map"):
            w('{"type":' + _dump(n.type) + "," + _dump("items" if n.type == "array" else "values"))
            w(":")
            child = n.items if n.type == "array" else n.values
            assert child is not None
            self.node(child, space)
            w(self._props(n.props) + "}")
            return
        if n.fullname in self.written:
            w(_dump(n.name if n.space == space else n.fullname))
            return
        self.written.add(n.fullname)
        w('{"type":' + _dump(n.type) + ',"name":' + _dump(n.name))
        if n.space is not None and n.space != space:
            w(',"namespace":' + _dump(n.space))
        elif n.space is None and space is not None:
            w(',"namespace":""')
        if n.doc is not None:
            w(',"doc":' + _dump(n.doc))
        if n.kind == "record":
            w(',"fields":[')
            for i, f in enumerate(n.fields):
                if i:
                    w(",")
                w('{"name":' + _dump(f.name) + ',"type":')
                self.node(f.type, n.space)
                if f.doc is not None:
                    w(',"doc":' + _dump(f.doc))
                if f.has_default:
                    w(',"default":' + _dump(f.default))
                if f.order != "ascending":
                    w(',"order":' + _dump(f.order))
                if f.aliases:
                    w(',"aliases":' + _dump(list(f.aliases)))
                w(self._props(f.props) + "}")
            w("]")
        elif n.type == "enum":
            w(',"symbols":' + _dump(list(n.symbols)))
            if n.enum_default is not None:
                w(',"default":' + _dump(n.enum_default))
        else:
            w(',"size":' + str(n.size))
        w(self._props(n.props))
        if n.aliases:
            w(',"aliases":' + _dump([_short(a, n.space) for a in n.aliases]))
        w("}")

    @staticmethod
    def _props(props: dict[str, Any]) -> str:
        return "".join("," + _dump(k) + ":" + _dump(v) for k, v in props.items())


def _short(alias: str, space: str | None) -> str:
    if space and alias.startswith(space + ".") and "." not in alias[len(space) + 1 :]:
        return alias[len(space) + 1 :]
    return alias


_LOGICAL_FIRST = ("logicalType", "precision", "scale")


class _NormalPrinter:
    """Confluent's normalized form (see the module docstring)."""

    def __init__(self, known: set[str]) -> None:
        self.written = set(known)
        self.out: list[str] = []

    def node(self, n: AvroNode) -> None:
        w = self.out.append
        if n.type in PRIMITIVES:
            if not n.props:
                w(_dump(n.type))
            else:
                w('{"type":' + _dump(n.type) + self._props(n.props) + "}")
        elif n.type == "union":
            w("[")
            for i, b in enumerate(n.branches):
                if i:
                    w(",")
                self.node(b)
            w("]")
        elif n.type in ("array", "map"):
            w('{"type":' + _dump(n.type) + ',"' + ("items" if n.type == "array" else "values"))
            w('":')
            child = n.items if n.type == "array" else n.values
            assert child is not None
            self.node(child)
            w(self._props(n.props) + "}")
        elif n.fullname in self.written:
            w(_dump(n.fullname))
        else:
            self.written.add(n.fullname)
            w('{"name":' + _dump(n.fullname) + ',"type":' + _dump(n.type))
            if n.type == "enum":
                w(',"symbols":' + _dump(list(n.symbols)))
            elif n.type == "fixed":
                w(',"size":' + str(n.size))
            else:
                w(',"fields":[')
                for i, f in enumerate(n.fields):
                    if i:
                        w(",")
                    w('{"name":' + _dump(f.name) + ',"type":')
                    self.node(f.type)
                    w(',"order":' + _dump(f.order))
                    if f.doc is not None:
                        w(',"doc":' + _dump(f.doc))
                    if f.aliases:
                        w(',"aliases":' + _dump(sorted(f.aliases)))
                    if f.has_default:
                        w(',"default":' + _dump(f.default))
                    w(self._sorted(f.props) + "}")
                w("]")
            logical = {k: n.props[k] for k in _LOGICAL_FIRST if k in n.props}
            rest = {k: v for k, v in n.props.items() if k not in logical}
            w(self._props(logical))
            if n.doc:
                w(',"doc":' + _dump(n.doc))
            if n.aliases:
                w(',"aliases":' + _dump(sorted(n.aliases)))
            if n.type == "enum" and n.enum_default is not None:
                w(',"default":' + _dump(n.enum_default))
            w(self._sorted(rest) + "}")

    def _props(self, props: dict[str, Any]) -> str:
        logical = [k for k in _LOGICAL_FIRST if k in props and not (k == "scale" and not props[k])]
        rest = sorted(k for k in props if k not in _LOGICAL_FIRST)
        return "".join("," + _dump(k) + ":" + _dump(props[k]) for k in [*logical, *rest])

    @staticmethod
    def _sorted(props: dict[str, Any]) -> str:
        return "".join("," + _dump(k) + ":" + _dump(props[k]) for k in sorted(props))


def _reference_json(refs: tuple[ResolvedReference, ...], seen: set[int]) -> list[Any]:
    """The JSON of every AVRO schema the references reach, dependencies first."""
    out: list[Any] = []
    for ref in refs:
        schema = ref.schema
        if not isinstance(schema, AvroSchema) or id(schema) in seen:
            continue
        seen.add(id(schema))
        out.extend(_reference_json(schema.references, seen))
        out.append(schema.json)
    return out


class AvroSchema:
    schema_type = "AVRO"

    def __init__(
        self,
        obj: Any,
        references: tuple[ResolvedReference, ...],
        root: AvroNode,
        known: dict[str, AvroNode],
        defined: dict[str, AvroNode],
    ) -> None:
        self.json = obj
        self.references = references
        self.root = root
        self._known = known
        self.defined = defined
        self._canonical: str | None = None

    def canonical(self) -> str:
        if self._canonical is None:
            printer = _Printer(set(self._known))
            printer.node(self.root, None)
            self._canonical = "".join(printer.out)
        return self._canonical

    def formatted(self, fmt: str | None) -> str:
        """`resolved`: the schema with its references' named types written inline, as a
        client without the references needs it; anything else: canonical text."""
        if fmt != "resolved" or not self.references:
            return self.canonical()
        printer = _Printer(set())
        printer.node(self.root, None)
        return "".join(printer.out)

    def normalized(self) -> AvroSchema:
        printer = _NormalPrinter(set(self._known))
        printer.node(self.root)
        refs = sorted(set(self.references), key=lambda r: (r.name, r.subject, r.version))
        return parse_avro("".join(printer.out), tuple(refs))

    def deep_equals(self, other: ParsedSchema) -> bool:
        return (
            isinstance(other, AvroSchema)
            and self.canonical() == other.canonical()
            and [r.reference() for r in self.references]
            == [r.reference() for r in other.references]
        )

    def is_backward_compatible(self, previous: ParsedSchema) -> list[str]:
        from logstore.schema_registry.schemas.avro_compat import reader_writer_differences

        assert isinstance(previous, AvroSchema)
        return reader_writer_differences(self.root, previous.root)

    def __str__(self) -> str:
        return self.canonical()


def parse_avro(text: str, references: tuple[ResolvedReference, ...] = ()) -> AvroSchema:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidSchemaError(f"Invalid schema {text[:200]}: {e}") from None
    if _depth(obj) > MAX_NESTING:
        raise InvalidSchemaError(f"Invalid schema: nested deeper than {MAX_NESTING} levels")
    known: dict[str, AvroNode] = {}
    for ref in references:
        if not isinstance(ref.schema, AvroSchema):
            raise InvalidSchemaError(f"Invalid schema reference {ref.name}: not an AVRO schema")
        for sub in _collect(ref.schema):
            known.update(sub)
    named: dict[str, Any] = {}
    try:
        for ref_obj in _reference_json(references, set()):
            fastavro_parse(ref_obj, named_schemas=named)
        fastavro_parse(obj, named_schemas=named)
        builder = _Builder(known)
        root = builder.build(obj, None)
    except InvalidSchemaError:
        raise
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    except Exception as e:  # fastavro's SchemaParseException, UnknownType, KeyError...
        raise InvalidSchemaError(f"Invalid schema {text[:200]}: {e}") from None
    return AvroSchema(obj, references, root, known, builder.defined)


def _depth(obj: Any) -> int:
    """The nesting depth of JSON containers in `obj`, without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return deepest


def _collect(schema: AvroSchema) -> list[dict[str, AvroNode]]:
    out = [_collect_one(r.schema) for r in schema.references if isinstance(r.schema, AvroSchema)]
    out.append(schema.defined)
    return out


def _collect_one(schema: AvroSchema) -> dict[str, AvroNode]:
    merged: dict[str, AvroNode] = {}
    for part in _collect(schema):
        merged.update(part)
    return merged
