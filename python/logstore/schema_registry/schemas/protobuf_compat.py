"""Confluent's Protobuf compatibility rules: the differences from an original (old) `.proto`
to its update (new), each a difference type at a path (`#/Message/Nested/3`: type names,
then a field number or a oneof name).

Fields are matched by number across the whole message (oneof members too). A field's type
may change only within a wire-compatible group (`SCALAR_KINDS`); an enum reads as a
general number; a field naming a message of another schema compares that message too.
Every type not in `COMPATIBLE_CHANGES` is an incompatibility, printed as Confluent prints
it: `{errorType:"<TYPE>", description:"<text>"}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from logstore.schema_registry.schemas.protobuf import (
    SCALARS,
    ProtobufSchema,
    ProtoEnum,
    ProtoField,
    ProtoMessage,
    TypeInfo,
    resolve_name,
)

# Difference types that do not stop the update from reading the original's data.
COMPATIBLE_CHANGES: frozenset[str] = frozenset(
    """
    MESSAGE_ADDED MESSAGE_MOVED ENUM_ADDED ENUM_REMOVED ENUM_CONST_ADDED ENUM_CONST_CHANGED
    ENUM_CONST_REMOVED FIELD_ADDED FIELD_REMOVED FIELD_NAME_CHANGED
    FIELD_STRING_OR_BYTES_LABEL_CHANGED ONEOF_ADDED ONEOF_REMOVED ONEOF_FIELD_ADDED
    ONEOF_FIELD_MOVED_TO_TOP_LEVEL
    """.split()
)

# Scalar types -> their wire-compatible group (an enum is a GENERAL_NUMBER).
SCALAR_KINDS: dict[str, str] = {
    **dict.fromkeys(("int32", "int64", "uint32", "uint64", "bool"), "GENERAL_NUMBER"),
    **dict.fromkeys(("sint32", "sint64"), "SIGNED_NUMBER"),
    **dict.fromkeys(("string", "bytes"), "STRING_OR_BYTES"),
    **dict.fromkeys(("fixed32", "sfixed32"), "FIXED32"),
    **dict.fromkeys(("fixed64", "sfixed64"), "FIXED64"),
    "float": "FLOAT",
    "double": "DOUBLE",
}
_NUMERIC = frozenset({"GENERAL_NUMBER", "SIGNED_NUMBER", "FIXED32", "FIXED64", "FLOAT", "DOUBLE"})

DESCRIPTIONS: dict[str, str] = {
    "PACKAGE_CHANGED": "The package at '{path}' in the %s schema does not match the package "
    "in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{path}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the %s schema does not "
    "match the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the %s schema "
    "does not match its kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the %s schema "
    "does not match its type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the %s "
    "schema does not match its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the %s schema is missing in "
    "the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{path}' in "
    "the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{path}' in the %s "
    "schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{path}' in the %s schema was "
    "moved out of its oneof to a top-level field in the %s schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the %s "
    "schema are outside a oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the %s schema "
    "is outside an existing oneof in the %s schema",
}


@dataclass(frozen=True)
class Difference:
    type: str
    path: str

    def message(self) -> str:
        description = DESCRIPTIONS.get(self.type, "").format(path=self.path)
        return f'{{errorType:"{self.type}", description:"{description}"}}'


class _Context:
    def __init__(self, original: ProtobufSchema, update: ProtobufSchema) -> None:
        self.original, self.update = original, update
        self.packages = {True: original.model.package, False: update.model.package}
        self.path: list[str] = []
        self.names: list[str] = []  # the message scope, for resolving relative names
        self.in_progress: set[int] = set()
        self.differences: list[Difference] = []

    def sub(self) -> _Context:
        ctx = _Context(self.original, self.update)
        ctx.packages = dict(self.packages)
        ctx.path, ctx.names = list(self.path), list(self.names)
        ctx.in_progress = set(self.in_progress)
        return ctx

    def add(self, kind: str) -> None:
        self.differences.append(Difference(kind, "#/" + "/".join(self.path)))

    @contextmanager
    def at(self, part: str, name: bool = False) -> Iterator[None]:
        self.path.append(part)
        if name:
            self.names.append(part)
        try:
            yield
        finally:
            self.path.pop()
            if name:
                self.names.pop()

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE_CHANGES for d in self.differences)

    def lookup(self, name: str, original: bool) -> tuple[str, TypeInfo] | None:
        schema = self.original if original else self.update
        package = [p for p in self.packages[original].split(".") if p]
        found = resolve_name(name, package + self.names, schema.types)
        return found if found is not None else schema.lookup(name, package + self.names)


def _compare_types(
    ctx: _Context,
    original: list[ProtoMessage | ProtoEnum],
    update: list[ProtoMessage | ProtoEnum],
) -> None:
    def split(
        types: list[ProtoMessage | ProtoEnum],
    ) -> tuple[dict[str, tuple[int, ProtoMessage]], dict[str, ProtoEnum]]:
        messages = [t for t in types if isinstance(t, ProtoMessage)]
        return (
            {m.name: (i, m) for i, m in enumerate(messages)},
            {t.name: t for t in types if isinstance(t, ProtoEnum)},
        )

    om, oe = split(original)
    um, ue = split(update)
    for name in sorted(set(om) | set(um)):
        with ctx.at(name, name=True):
            if name not in um:
                ctx.add("MESSAGE_REMOVED")
            elif name not in om:
                ctx.add("MESSAGE_ADDED")
            else:
                _compare_message(ctx, om[name][1], um[name][1])
                if om[name][0] != um[name][0]:
                    ctx.add("MESSAGE_MOVED")
    for name in sorted(set(oe) | set(ue)):
        with ctx.at(name, name=True):
            if name not in ue:
                ctx.add("ENUM_REMOVED")
            elif name not in oe:
                ctx.add("ENUM_ADDED")
            else:
                _compare_enum(ctx, oe[name], ue[name])


def _compare_enum(ctx: _Context, original: ProtoEnum, update: ProtoEnum) -> None:
    o = {number: name for name, number in original.constants}
    u = {number: name for name, number in update.constants}
    for number in sorted(set(o) | set(u)):
        with ctx.at(str(number)):
            if number not in u:
                ctx.add("ENUM_CONST_REMOVED")
            elif number not in o:
                ctx.add("ENUM_CONST_ADDED")
            elif o[number] != u[number]:
                ctx.add("ENUM_CONST_CHANGED")


def _compare_message(ctx: _Context, original: ProtoMessage, update: ProtoMessage) -> None:
    if id(original) not in ctx.in_progress:
        ctx.in_progress.add(id(original))
        try:
            _compare_fields(ctx, original, update)
        finally:
            ctx.in_progress.discard(id(original))
    _compare_types(ctx, original.nested, update.nested)


def _compare_fields(ctx: _Context, original: ProtoMessage, update: ProtoMessage) -> None:
    o_by = {f.number: f for f in original.fields}
    u_by = {f.number: f for f in update.fields}
    o_oneofs = set(original.oneofs)
    u_oneofs = set(update.oneofs)
    deleted = {
        name
        for name in o_oneofs - u_oneofs
        if not any(f.oneof == name and f.number in u_by for f in original.fields)
    }
    for oneof in update.oneofs:
        with ctx.at(oneof):
            groups: set[str] = set()
            moved_in = 0
            for f in update.fields:
                if f.oneof != oneof:
                    continue
                before = o_by.get(f.number)
                if before is not None and before.oneof is not None:
                    groups.add("oneof:" + before.oneof)
                elif before is not None:
                    groups.add(f"field:{f.number}")
                    moved_in += 1
            if len(groups) > 1:
                ctx.add(
                    "MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1
                    else "FIELD_MOVED_TO_EXISTING_ONEOF"
                )  # fmt: skip
    for oneof in sorted(o_oneofs | u_oneofs):
        with ctx.at(oneof):
            if oneof not in u_oneofs:
                ctx.add("ONEOF_REMOVED")
            elif oneof not in o_oneofs:
                ctx.add("ONEOF_ADDED")
    for number in sorted(set(o_by) | set(u_by)):
        before, after = o_by.get(number), u_by.get(number)
        if after is None:
            assert before is not None
            if before.oneof is not None:
                if before.oneof not in deleted:
                    with ctx.at(before.oneof), ctx.at(str(number)):
                        ctx.add("ONEOF_FIELD_REMOVED")
            else:
                with ctx.at(str(number)):
                    required = before.label == "required"
                    ctx.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED")
        elif before is None:
            if after.oneof is not None:
                with ctx.at(after.oneof), ctx.at(str(number)):
                    ctx.add("ONEOF_FIELD_ADDED")
            else:
                with ctx.at(str(number)):
                    required = after.label == "required"
                    ctx.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED")
        else:
            if before.oneof is not None and after.oneof is None:
                with ctx.at(str(number)):
                    ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
            if after.oneof is not None:
                with ctx.at(after.oneof), ctx.at(str(number)):
                    _compare_field(ctx, before, after)
            else:
                with ctx.at(str(number)):
                    _compare_field(ctx, before, after)


def _compare_field(ctx: _Context, original: ProtoField, update: ProtoField) -> None:
    if original.name != update.name:
        ctx.add("FIELD_NAME_CHANGED")
    _compare_labels_and_types(ctx, original.label, update.label, original, update)


def _kind(ctx: _Context, f: ProtoField | str, original: bool) -> str:
    type_name = f if isinstance(f, str) else f.type
    if type_name in SCALARS:
        return "SCALAR"
    if type_name == "map":
        return "MAP"
    found = ctx.lookup(type_name, original)
    return "SCALAR" if found is not None and found[1].is_enum else "MESSAGE"


def _scalar_kind(ctx: _Context, type_name: str, original: bool) -> str:
    if type_name in SCALAR_KINDS:
        return SCALAR_KINDS[type_name]
    return "GENERAL_NUMBER"  # an enum


def _compare_labels_and_types(
    ctx: _Context,
    original_label: str | None,
    update_label: str | None,
    original: ProtoField | str,
    update: ProtoField | str,
) -> None:
    ok, uk = _kind(ctx, original, True), _kind(ctx, update, False)
    if ok != uk:
        ctx.add("FIELD_KIND_CHANGED")
        return
    if ok == "MAP":
        assert isinstance(original, ProtoField) and isinstance(update, ProtoField)
        _compare_labels_and_types(ctx, None, None, original.key_type, update.key_type)
        _compare_labels_and_types(ctx, None, None, original.value_type, update.value_type)
        return
    o_type = original if isinstance(original, str) else original.type
    u_type = update if isinstance(update, str) else update.type
    if ok == "SCALAR":
        osk, usk = _scalar_kind(ctx, o_type, True), _scalar_kind(ctx, u_type, False)
        if osk != usk:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif original_label and update_label and original_label != update_label:
            if osk in _NUMERIC:
                ctx.add("FIELD_NUMERIC_LABEL_CHANGED")
            elif osk == "STRING_OR_BYTES":
                ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED")
        return
    _compare_message_types(ctx, o_type, u_type)


def _compare_message_types(ctx: _Context, original: str, update: str) -> None:
    o, u = ctx.lookup(original, True), ctx.lookup(update, False)
    if o is None or u is None:
        if original != update:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    (o_full, o_info), (u_full, u_info) = o, u
    o_local = o_full[len(o_info.package) + 1 :] if o_info.package else o_full
    u_local = u_full[len(u_info.package) + 1 :] if u_info.package else u_full
    if o_local != u_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if o_info.origin == u_info.origin:
        return  # both in this file (compared as its types), or the same version of a schema
    if not isinstance(o_info.element, ProtoMessage) or not isinstance(u_info.element, ProtoMessage):
        return
    sub = ctx.sub()
    sub.packages = {True: o_info.package, False: u_info.package}
    sub.path = o_local.split(".")
    sub.names = list(sub.path)
    _compare_message(sub, o_info.element, u_info.element)
    ctx.differences.extend(sub.differences)
    if not sub.compatible():
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def differences(original: ProtobufSchema, update: ProtobufSchema) -> list[Difference]:
    ctx = _Context(original, update)
    if original.model.package != update.model.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, original.model.types, update.model.types)
    return list(dict.fromkeys(ctx.differences))


def backward_differences(original: ProtobufSchema, update: ProtobufSchema) -> list[str]:
    """Confluent's messages for the incompatible differences from `original` to `update`."""
    return [d.message() for d in differences(original, update) if d.type not in COMPATIBLE_CHANGES]
