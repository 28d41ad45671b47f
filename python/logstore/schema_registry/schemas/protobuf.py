""".proto schemas: parsed by proto-schema-parser (the protobuf grammar, ANTLR), any syntax
error refused, then checked as protoc would for what the registry relies on: every field
type resolves (in the file, in an imported reference, or a well-known type of an imported
`google/...` or `confluent/...` file), field numbers are unique per message and in range,
names are unique, a proto3 enum starts at 0, every import is a reference or well known.

References are imports: a reference's `name` is the file name the schema imports.

Canonical text: the file printed back from its syntax tree (`protobuf_text.py`: one element
per line, two-space indent, string literals as written). Normalized: field types fully
qualified (`.pkg.Msg`), imports sorted.

Name resolution follows protobuf's scoping: a relative name is looked up in the innermost
message scope first, then each enclosing scope, then the package and its parents.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

from logstore.schema_registry.errors import InvalidSchemaError
from logstore.schema_registry.schemas import ParsedSchema, ResolvedReference
from logstore.schema_registry.schemas.protobuf_text import print_proto

SCALARS = frozenset(
    "double float int32 int64 uint32 uint64 sint32 sint64 fixed32 fixed64 sfixed32 sfixed64 "
    "bool string bytes".split()
)
_MAP_KEYS = SCALARS - {"double", "float", "bytes"}
MAX_FIELD_NUMBER = 536_870_911
_RESERVED_NUMBERS = range(19_000, 20_000)
# Types of the files every protobuf schema may import without a reference (Confluent and
# protoc ship them): message names, and the enums among them.
WELL_KNOWN_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")
_WELL_KNOWN_ENUMS = frozenset({"google.protobuf.NullValue", "google.protobuf.Syntax"})
# A type's origin: ("", -1) in this file, (subject, version) of a reference, ("", 0) well known.
LOCAL: tuple[str, int] = ("", -1)
WELL_KNOWN: tuple[str, int] = ("", 0)


class _Refuse(ErrorListener):  # type: ignore[misc]
    def syntaxError(  # noqa: N802 (ANTLR's name)
        self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any
    ) -> None:
        raise InvalidSchemaError(f"Invalid schema: line {line}:{column} {msg}")


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Refuse())


@dataclass(eq=False)
class ProtoField:
    name: str
    number: int
    type: str  # a scalar, a (possibly qualified) type name, or "map" with key/value types
    label: str | None  # "optional", "required", "repeated" or None (proto3 implicit)
    oneof: str | None = None
    key_type: str = ""
    value_type: str = ""
    group: bool = False  # a proto2 group: the field of a nested message of the same name


@dataclass(eq=False)
class ProtoEnum:
    name: str
    constants: list[tuple[str, int]] = field(default_factory=list)


@dataclass(eq=False)
class ProtoMessage:
    name: str
    fields: list[ProtoField] = field(default_factory=list)
    oneofs: list[str] = field(default_factory=list)
    nested: list[ProtoMessage | ProtoEnum] = field(default_factory=list)


@dataclass(frozen=True)
class TypeInfo:
    package: str
    element: ProtoMessage | ProtoEnum | None  # None: a well-known type
    origin: tuple[str, int]

    @property
    def is_enum(self) -> bool:
        return isinstance(self.element, ProtoEnum)


def _label(cardinality: ast.FieldCardinality | None) -> str | None:
    return None if cardinality is None else cardinality.value.lower()


def _message(node: ast.Message | ast.Group) -> ProtoMessage:
    message = ProtoMessage(node.name)
    for element in node.elements:
        if isinstance(element, ast.Field):
            message.fields.append(
                ProtoField(element.name, element.number, element.type, _label(element.cardinality))
            )
        elif isinstance(element, ast.MapField):
            message.fields.append(
                ProtoField(
                    element.name,
                    element.number,
                    "map",
                    None,
                    None,
                    element.key_type,
                    element.value_type,
                )  # fmt: skip
            )
        elif isinstance(element, ast.Group):
            message.fields.append(
                ProtoField(
                    element.name.lower(),
                    element.number,
                    element.name,
                    _label(element.cardinality),
                    group=True,
                )  # fmt: skip
            )
            message.nested.append(_message(element))
        elif isinstance(element, ast.OneOf):
            message.oneofs.append(element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    message.fields.append(
                        ProtoField(member.name, member.number, member.type, None, element.name)
                    )
                elif isinstance(member, ast.Group):
                    message.fields.append(
                        ProtoField(
                            member.name.lower(),
                            member.number,
                            member.name,
                            None,
                            element.name,
                            group=True,
                        )  # fmt: skip
                    )
                    message.nested.append(_message(member))
        elif isinstance(element, ast.Message):
            message.nested.append(_message(element))
        elif isinstance(element, ast.Enum):
            message.nested.append(_enum(element))
    return message


def _enum(node: ast.Enum) -> ProtoEnum:
    values = [(v.name, v.number) for v in node.elements if isinstance(v, ast.EnumValue)]
    return ProtoEnum(node.name, values)


@dataclass
class ProtoFile:
    syntax: str
    package: str
    imports: list[str]
    types: list[ProtoMessage | ProtoEnum]


def _model(tree: ast.File) -> ProtoFile:
    package, imports = "", []
    types: list[ProtoMessage | ProtoEnum] = []
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            package = element.name
        elif isinstance(element, ast.Import):
            imports.append(element.name)
        elif isinstance(element, ast.Message):
            types.append(_message(element))
        elif isinstance(element, ast.Enum):
            types.append(_enum(element))
    return ProtoFile(tree.syntax or "proto2", package, imports, types)


def _register(
    types: list[ProtoMessage | ProtoEnum],
    scope: str,
    package: str,
    origin: tuple[str, int],
    into: dict[str, TypeInfo],
) -> None:
    for t in types:
        full = f"{scope}.{t.name}" if scope else t.name
        if origin == LOCAL and full in into and into[full].origin == LOCAL:
            raise InvalidSchemaError(f"Invalid schema: {full} is already defined")
        into[full] = TypeInfo(package, t, origin)
        if isinstance(t, ProtoMessage):
            _register(t.nested, full, package, origin, into)


def resolve_name(
    name: str, scope: list[str], types: dict[str, TypeInfo]
) -> tuple[str, TypeInfo] | None:
    """`name` as seen from `scope` (package parts then message names), protobuf's way."""
    if name.startswith("."):
        info = types.get(name[1:])
        return (name[1:], info) if info else None
    prefix = list(scope)
    while prefix:
        full = ".".join(prefix) + "." + name
        if full in types:
            return full, types[full]
        prefix.pop()
    return (name, types[name]) if name in types else None


class ProtobufSchema:
    schema_type = "PROTOBUF"

    def __init__(
        self, tree: ast.File, model: ProtoFile, references: tuple[ResolvedReference, ...]
    ) -> None:
        self.tree = tree
        self.model = model
        self.references = references
        self.types: dict[str, TypeInfo] = {}
        self._canonical: str | None = None
        for ref in references:
            if not isinstance(ref.schema, ProtobufSchema):
                raise InvalidSchemaError(f"Invalid schema reference {ref.name}: not PROTOBUF")
            for name, info in ref.schema.types.items():
                origin = (ref.subject, ref.version) if info.origin == LOCAL else info.origin
                self.types[name] = dataclasses.replace(info, origin=origin)
        self.well_known = any(i.startswith(WELL_KNOWN_PREFIXES) for i in model.imports)
        scope = model.package
        _register(model.types, scope, model.package, LOCAL, self.types)

    def lookup(self, name: str, scope: list[str]) -> tuple[str, TypeInfo] | None:
        found = resolve_name(name, scope, self.types)
        if found is None and self.well_known:
            bare = name.lstrip(".")
            if bare.startswith(("google.", "confluent.")):
                enum = ProtoEnum(bare) if bare in _WELL_KNOWN_ENUMS else None
                return bare, TypeInfo(bare.rsplit(".", 1)[0], enum, WELL_KNOWN)
        return found

    def canonical(self) -> str:
        if self._canonical is None:
            self._canonical = print_proto(self.tree)
        return self._canonical

    def normalized(self) -> ProtobufSchema:
        tree = dataclasses.replace(self.tree, file_elements=self._qualified(self.tree))
        refs = tuple(sorted(set(self.references), key=lambda r: (r.name, r.subject, r.version)))
        return parse_protobuf(print_proto(tree), refs)

    def _qualified(self, tree: ast.File) -> list[Any]:
        package = [p for p in self.model.package.split(".") if p]
        imports = sorted(
            (e for e in tree.file_elements if isinstance(e, ast.Import)), key=lambda e: e.name
        )
        out: list[Any] = []
        for e in tree.file_elements:
            if isinstance(e, ast.Import):
                out.append(imports.pop(0))
            elif isinstance(e, ast.Message):
                out.append(self._qualify_message(e, package))
            else:
                out.append(e)
        return out

    def _qualify_message(self, message: ast.Message, scope: list[str]) -> ast.Message:
        inner = [*scope, message.name]

        def qualify(name: str) -> str:
            if name in SCALARS:
                return name
            found = self.lookup(name, inner)
            return "." + found[0] if found else name

        elements: list[Any] = []
        for e in message.elements:
            if isinstance(e, ast.Field):
                elements.append(dataclasses.replace(e, type=qualify(e.type)))
            elif isinstance(e, ast.MapField):
                elements.append(dataclasses.replace(e, value_type=qualify(e.value_type)))
            elif isinstance(e, ast.OneOf):
                members = [
                    dataclasses.replace(m, type=qualify(m.type)) if isinstance(m, ast.Field)
                    else m
                    for m in e.elements
                ]  # fmt: skip
                elements.append(dataclasses.replace(e, elements=members))
            elif isinstance(e, ast.Message):
                elements.append(self._qualify_message(e, inner))
            else:
                elements.append(e)
        return dataclasses.replace(message, elements=elements)

    def formatted(self, fmt: str | None) -> str:
        """`serialized`: the base64 `FileDescriptorProto`; anything else: canonical text."""
        if fmt == "serialized":
            from logstore.schema_registry.schemas.protobuf_descriptor import serialized

            return serialized(self)
        return self.canonical()

    def deep_equals(self, other: ParsedSchema) -> bool:
        return (
            isinstance(other, ProtobufSchema)
            and self.canonical() == other.canonical()
            and [r.reference() for r in self.references]
            == [r.reference() for r in other.references]
        )

    def is_backward_compatible(self, previous: ParsedSchema) -> list[str]:
        from logstore.schema_registry.schemas.protobuf_compat import backward_differences

        assert isinstance(previous, ProtobufSchema)
        return backward_differences(previous, self)

    def __str__(self) -> str:
        return self.canonical()


def _check(schema: ProtobufSchema) -> None:
    model = schema.model
    if model.syntax not in ("proto2", "proto3"):
        raise InvalidSchemaError(f"Invalid schema: unknown syntax {model.syntax}")
    known = {r.name for r in schema.references}
    for imported in model.imports:
        if imported not in known and not imported.startswith(WELL_KNOWN_PREFIXES):
            raise InvalidSchemaError(f"Invalid schema: import {imported} has no reference")
    package = [p for p in model.package.split(".") if p]

    def check_type(name: str, scope: list[str], where: str) -> None:
        if name not in SCALARS and schema.lookup(name, scope) is None:
            raise InvalidSchemaError(f"Invalid schema: {where} has unknown type {name}")

    def check(types: list[ProtoMessage | ProtoEnum], scope: list[str]) -> None:
        for t in types:
            if isinstance(t, ProtoEnum):
                if not t.constants:
                    raise InvalidSchemaError(f"Invalid schema: enum {t.name} has no values")
                if model.syntax == "proto3" and t.constants[0][1] != 0:
                    raise InvalidSchemaError(f"Invalid schema: enum {t.name} must start at 0")
                continue
            inner = [*scope, t.name]
            numbers: set[int] = set()
            names: set[str] = set()
            for f in t.fields:
                where = f"{'.'.join(inner)}.{f.name}"
                if f.number in numbers or f.name in names:
                    raise InvalidSchemaError(f"Invalid schema: {where} reuses a number or name")
                if not 1 <= f.number <= MAX_FIELD_NUMBER or f.number in _RESERVED_NUMBERS:
                    raise InvalidSchemaError(f"Invalid schema: {where} number {f.number}")
                numbers.add(f.number)
                names.add(f.name)
                if f.type == "map":
                    if f.key_type not in _MAP_KEYS:
                        raise InvalidSchemaError(f"Invalid schema: {where} map key type")
                    check_type(f.value_type, inner, where)
                else:
                    check_type(f.type, inner, where)
            check(t.nested, inner)

    check(model.types, package)


def parse_protobuf(text: str, references: tuple[ResolvedReference, ...] = ()) -> ProtobufSchema:
    """Parses `.proto` text, or the base64 of a serialized `FileDescriptorProto` (what
    Confluent's serializers register), which is turned into `.proto` text first."""
    try:
        return _parse(text, references)
    except InvalidSchemaError:
        from logstore.schema_registry.schemas.protobuf_descriptor import (
            decode_descriptor,
            from_descriptor_text,
        )

        descriptor = decode_descriptor(text)
        if descriptor is None:
            raise
        return _parse(from_descriptor_text(descriptor), references)


def _parse(text: str, references: tuple[ResolvedReference, ...]) -> ProtobufSchema:
    try:
        tree = Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
        schema = ProtobufSchema(tree, _model(tree), references)
    except InvalidSchemaError:
        raise
    except RecursionError:
        raise InvalidSchemaError("Invalid schema: nested too deeply") from None
    except Exception as e:  # the parser's own failures on input it recovered from
        raise InvalidSchemaError(f"Invalid schema: {e}") from None
    _check(schema)
    return schema
