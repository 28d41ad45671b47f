"""PROTOBUF schemas as `FileDescriptorProto`s, the form Confluent's clients exchange: a
serializer registers a schema as the base64 of its file's serialized descriptor, and a
deserializer asks for `?format=serialized` and builds a descriptor pool from the answer.

`to_descriptor` builds a schema's descriptor: type names fully qualified (`.pkg.Msg`), a map
field as a repeated nested `<Name>Entry` message (`map_entry`, key 1, value 2), a proto3
`optional` field in its synthetic oneof `_<name>` after the real ones, imports as
dependencies. `from_descriptor_text` turns a base64 descriptor back into `.proto` text
(map entries folded back into `map<,>` fields, synthetic oneofs into `optional`).
"""

from __future__ import annotations

import base64
import binascii
import re

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from logstore.schema_registry.schemas.protobuf import (
    ProtobufSchema,
    ProtoEnum,
    ProtoField,
    ProtoMessage,
)

_FDP = descriptor_pb2.FieldDescriptorProto
# Scalar type names <-> descriptor field types.
SCALAR_TYPES: dict[str, int] = {
    "double": _FDP.TYPE_DOUBLE, "float": _FDP.TYPE_FLOAT, "int64": _FDP.TYPE_INT64,
    "uint64": _FDP.TYPE_UINT64, "int32": _FDP.TYPE_INT32, "fixed64": _FDP.TYPE_FIXED64,
    "fixed32": _FDP.TYPE_FIXED32, "bool": _FDP.TYPE_BOOL, "string": _FDP.TYPE_STRING,
    "bytes": _FDP.TYPE_BYTES, "uint32": _FDP.TYPE_UINT32, "sfixed32": _FDP.TYPE_SFIXED32,
    "sfixed64": _FDP.TYPE_SFIXED64, "sint32": _FDP.TYPE_SINT32, "sint64": _FDP.TYPE_SINT64,
}  # fmt: skip
_SCALAR_NAMES = {v: k for k, v in SCALAR_TYPES.items()}
_LABELS = {None: _FDP.LABEL_OPTIONAL, "optional": _FDP.LABEL_OPTIONAL,
           "required": _FDP.LABEL_REQUIRED, "repeated": _FDP.LABEL_REPEATED}  # fmt: skip
_BASE64 = re.compile(r"^[A-Za-z0-9+/\s]+={0,2}\s*$")


def _entry_name(field_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


class _Builder:
    def __init__(self, schema: ProtobufSchema) -> None:
        self.schema = schema
        self.proto3 = schema.model.syntax == "proto3"

    def type_of(self, name: str, scope: list[str]) -> tuple[int, str]:
        if name in SCALAR_TYPES:
            return SCALAR_TYPES[name], ""
        found = self.schema.lookup(name, scope)
        if found is None:  # refused when parsed; kept total for the type checker
            return _FDP.TYPE_MESSAGE, "." + name.lstrip(".")
        full, info = found
        return (_FDP.TYPE_ENUM if info.is_enum else _FDP.TYPE_MESSAGE), "." + full

    def message(self, m: ProtoMessage, scope: list[str]) -> descriptor_pb2.DescriptorProto:
        out = descriptor_pb2.DescriptorProto(name=m.name)
        inner = [*scope, m.name]
        for name in m.oneofs:
            out.oneof_decl.add(name=name)
        synthetic: list[tuple[descriptor_pb2.FieldDescriptorProto, str]] = []
        for f in m.fields:
            fd = out.field.add(name=f.name, number=f.number, label=_LABELS[f.label])
            if f.type == "map":
                self._map(out, fd, f, inner)
            else:
                fd.type, type_name = self.type_of(f.type, inner)
                if f.group:
                    fd.type = _FDP.TYPE_GROUP
                if type_name:
                    fd.type_name = type_name
            if f.oneof is not None:
                fd.oneof_index = m.oneofs.index(f.oneof)
            elif self.proto3 and f.label == "optional":
                fd.proto3_optional = True
                synthetic.append((fd, f.name))
        for fd, name in synthetic:
            fd.oneof_index = len(out.oneof_decl)
            out.oneof_decl.add(name="_" + name)
        for t in m.nested:
            if isinstance(t, ProtoMessage):
                out.nested_type.append(self.message(t, inner))
            else:
                out.enum_type.append(_enum(t))
        return out

    def _map(
        self,
        out: descriptor_pb2.DescriptorProto,
        fd: descriptor_pb2.FieldDescriptorProto,
        f: ProtoField,
        inner: list[str],
    ) -> None:
        entry = out.nested_type.add(name=_entry_name(f.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=_FDP.LABEL_OPTIONAL)
        key.type = SCALAR_TYPES[f.key_type]
        value = entry.field.add(name="value", number=2, label=_FDP.LABEL_OPTIONAL)
        value.type, type_name = self.type_of(f.value_type, inner)
        if type_name:
            value.type_name = type_name
        fd.label = _FDP.LABEL_REPEATED
        fd.type = _FDP.TYPE_MESSAGE
        fd.type_name = "." + ".".join([*inner, entry.name])


def _enum(e: ProtoEnum) -> descriptor_pb2.EnumDescriptorProto:
    out = descriptor_pb2.EnumDescriptorProto(name=e.name)
    for name, number in e.constants:
        out.value.add(name=name, number=number)
    return out


def to_descriptor(schema: ProtobufSchema) -> descriptor_pb2.FileDescriptorProto:
    model = schema.model
    out = descriptor_pb2.FileDescriptorProto(name="default", package=model.package or None)
    if model.syntax == "proto3":
        out.syntax = "proto3"
    out.dependency.extend(model.imports)
    builder = _Builder(schema)
    package = [p for p in model.package.split(".") if p]
    for t in model.types:
        if isinstance(t, ProtoMessage):
            out.message_type.append(builder.message(t, package))
        else:
            out.enum_type.append(_enum(t))
    return out


def serialized(schema: ProtobufSchema) -> str:
    """The base64 of the schema's serialized `FileDescriptorProto` (`format=serialized`)."""
    return base64.standard_b64encode(to_descriptor(schema).SerializeToString()).decode("ascii")


def decode_descriptor(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor `text` holds in base64, or None when it holds none."""
    if not _BASE64.match(text):
        return None
    try:
        raw = base64.b64decode("".join(text.split()), validate=True)
        fdp = descriptor_pb2.FileDescriptorProto()
        fdp.ParseFromString(raw)
    except (binascii.Error, DecodeError, ValueError):
        return None
    if not (fdp.message_type or fdp.enum_type or fdp.package or fdp.syntax):
        return None
    return fdp


def _type_text(fd: descriptor_pb2.FieldDescriptorProto) -> str:
    if fd.type in _SCALAR_NAMES:
        return _SCALAR_NAMES[fd.type]
    return str(fd.type_name)


def _message_text(m: descriptor_pb2.DescriptorProto, proto3: bool, indent: str) -> list[str]:
    lines = [f"{indent}message {m.name} {{"]
    inner = indent + "  "
    entries = {
        n.name: n for n in m.nested_type if n.options.map_entry and len(n.field) == 2
    }  # fmt: skip
    real_oneofs = [
        i for i in range(len(m.oneof_decl))
        if not any(f.proto3_optional and f.oneof_index == i for f in m.field if
                   f.HasField("oneof_index"))
    ]  # fmt: skip

    def field_line(fd: descriptor_pb2.FieldDescriptorProto, pad: str, in_oneof: bool) -> str:
        entry_name = fd.type_name.rsplit(".", 1)[-1]
        if fd.label == _FDP.LABEL_REPEATED and entry_name in entries and fd.type_name:
            key, value = sorted(entries[entry_name].field, key=lambda x: x.number)
            return f"{pad}map<{_type_text(key)}, {_type_text(value)}> {fd.name} = {fd.number};"
        label = ""
        if fd.label == _FDP.LABEL_REPEATED:
            label = "repeated "
        elif fd.label == _FDP.LABEL_REQUIRED:
            label = "required "
        elif not in_oneof and (fd.proto3_optional or not proto3):
            label = "optional "
        return f"{pad}{label}{_type_text(fd)} {fd.name} = {fd.number};"

    for fd in m.field:
        if fd.HasField("oneof_index") and fd.oneof_index in real_oneofs:
            continue
        lines.append(field_line(fd, inner, False))
    for i in real_oneofs:
        lines.append(f"{inner}oneof {m.oneof_decl[i].name} {{")
        for fd in m.field:
            if fd.HasField("oneof_index") and fd.oneof_index == i:
                lines.append(field_line(fd, inner + "  ", True))
        lines.append(f"{inner}}}")
    for nested in m.nested_type:
        if nested.name not in entries:
            lines.extend(_message_text(nested, proto3, inner))
    for e in m.enum_type:
        lines.extend(_enum_text(e, inner))
    lines.append(f"{indent}}}")
    return lines


def _enum_text(e: descriptor_pb2.EnumDescriptorProto, indent: str) -> list[str]:
    lines = [f"{indent}enum {e.name} {{"]
    lines.extend(f"{indent}  {v.name} = {v.number};" for v in e.value)
    lines.append(f"{indent}}}")
    return lines


def from_descriptor_text(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    """`.proto` text declaring what `fdp` declares (file options are not carried)."""
    proto3 = fdp.syntax == "proto3"
    lines = [f'syntax = "{"proto3" if proto3 else "proto2"}";']
    if fdp.package:
        lines.append(f"package {fdp.package};")
    lines.extend(f'import "{d}";' for d in fdp.dependency)
    for m in fdp.message_type:
        lines.extend(_message_text(m, proto3, ""))
    for e in fdp.enum_type:
        lines.extend(_enum_text(e, ""))
    return "\n".join(lines) + "\n"
