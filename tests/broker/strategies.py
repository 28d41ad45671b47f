"""Hypothesis strategies that build random messages from their schemas.

``message_strategy(cls, version)`` draws an instance of a request or
response class whose fields hold random values where ``version`` carries
them and defaults elsewhere, so that encoding at ``version`` and decoding
gives back an equal object.  Nullable fields may be ``None`` only in
versions where the schema allows it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from logstore.protocol import types as t
from logstore.protocol.schema import Array, Field, Message, Struct

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)

_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "float64": st.floats(allow_nan=False),
    "bool": st.booleans(),
    "uuid": st.uuids(),
    "string": _TEXT,
    "bytes": st.binary(max_size=24),
    "records": st.binary(max_size=48),
}


def _type_strategy(typ: Any, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if isinstance(typ, t.Primitive):
        return _PRIMITIVES[typ.name]
    if isinstance(typ, Array):
        return st.lists(_type_strategy(typ.element, version, flexible), max_size=3)
    return struct_strategy(typ, version, flexible)


def _field_strategy(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    if version not in f.versions:
        return st.builds(lambda: f.default)
    s = _type_strategy(f.type, version, flexible)
    if version in f.nullable:
        s = st.none() | s
    return s


@cache
def struct_strategy(struct: Struct, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    fields = {f.name: _field_strategy(f, version, flexible) for f in struct.fields}
    return st.fixed_dictionaries(fields).map(lambda kw: struct.cls(**kw))


def message_strategy(cls: type[Message], version: int) -> st.SearchStrategy[Message]:
    return struct_strategy(cls.SCHEMA, version, cls.is_flexible(version))
