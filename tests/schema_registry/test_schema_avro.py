"""AVRO schemas: parsing, canonical text, references, and Avro's resolution rules as
Confluent's compatibility levels (examples from Confluent's AvroCompatibilityTest)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.schema_registry.errors import InvalidSchemaError
from logstore.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    Reference,
    ResolvedReference,
    check_compatibility,
    parse_schema,
    resolve_references,
)
from logstore.schema_registry.schemas.avro_compat import PROMOTIONS


def avro(obj: object) -> object:
    return parse_schema("AVRO", json.dumps(obj))


def record(*fields: dict[str, object], name: str = "myrecord") -> object:
    return avro({"type": "record", "name": name, "fields": list(fields)})


S1 = record({"type": "string", "name": "f1"})
S2 = record({"type": "string", "name": "f1"}, {"type": "string", "name": "f2", "default": "foo"})
S3 = record({"type": "string", "name": "f1"}, {"type": "string", "name": "f2"})
S4 = record({"type": "string", "name": "f1_new", "aliases": ["f1"]})
S6 = record({"type": ["null", "string"], "name": "f1", "doc": "doc of f1"})
S7 = record({"type": ["null", "string", "int"], "name": "f1", "doc": "doc of f1"})
S8 = record(
    {"type": "string", "name": "f1"},
    {"type": "string", "name": "f2", "default": "foo"},
    {"type": "string", "name": "f3", "default": "bar"},
)


def ok(level: str, new: object, *previous: object) -> bool:
    return check_compatibility(level, new, list(previous)) == []  # type: ignore[arg-type]


def test_confluent_backward_examples() -> None:
    assert ok("BACKWARD", S2, S1)  # a field with a default added
    assert not ok("BACKWARD", S3, S1)  # a field without a default added
    assert ok("BACKWARD", S4, S1)  # renamed with an alias
    assert ok("BACKWARD", S6, S1)  # a type widened to a union
    assert not ok("BACKWARD", S1, S6)  # a union narrowed to one of its types
    assert ok("BACKWARD", S7, S6)  # a branch added to a union
    assert not ok("BACKWARD", S6, S7)  # a branch removed
    assert ok("BACKWARD", S3, S2, S1)  # only the latest is checked


def test_confluent_transitive_and_forward_examples() -> None:
    assert ok("BACKWARD_TRANSITIVE", S8, S2, S1)
    assert ok("BACKWARD_TRANSITIVE", S3, S2)
    assert not ok("BACKWARD_TRANSITIVE", S3, S2, S1)
    assert ok("FORWARD", S2, S1) and ok("FORWARD", S3, S1)
    assert ok("FORWARD", S3, S2) and ok("FORWARD", S2, S3)
    assert ok("FORWARD", S1, S2, S3)
    assert ok("FORWARD_TRANSITIVE", S1, S2, S8)
    assert not ok("FORWARD_TRANSITIVE", S1, S2, S3)
    assert ok("FULL", S2, S1)
    assert ok("FULL", S3, S2, S1)
    assert not ok("FULL_TRANSITIVE", S3, S2, S1)
    assert ok("NONE", S3, S1)


def test_messages_are_confluents() -> None:
    messages = check_compatibility("BACKWARD", S3, [S1], [1])  # type: ignore[list-item]
    assert messages == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path "
        "'/fields/1' in the new schema has no default value and is missing in the old schema', "
        "additionalInfo:'f2'}",
        "{oldSchemaVersion: 1}",
        "{oldSchema: '" + S1.canonical() + "'}",  # type: ignore[attr-defined]
    ]
    forward = check_compatibility("FORWARD", S6, [S1])  # type: ignore[list-item]
    assert forward[0] == (
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type/0') of a field "
        "in the old schema does not match with the new schema', additionalInfo:'reader type: "
        "STRING not compatible with writer type: NULL'}"
    )
    narrowed = check_compatibility("BACKWARD", S1, [S7])  # type: ignore[list-item]
    assert len(narrowed) == 3 and "'/fields/0/type/2'" in narrowed[1]
    union = avro(["null", "string"])
    assert check_compatibility("BACKWARD", union, [avro("int")])[0] == (  # type: ignore
        "{errorType:'MISSING_UNION_BRANCH', description:'The new schema is missing a type inside "
        "a union field at path '/' in the old schema', "
        "additionalInfo:'reader union lacking writer type: INT'}"
    )
    int_to_string = record({"type": "int", "name": "f1"})
    assert check_compatibility("BACKWARD", S1, [int_to_string])[0] == (  # type: ignore[list-item]
        "{errorType:'TYPE_MISMATCH', description:'The type (path '/fields/0/type') of a field in "
        "the new schema does not match with the old schema', additionalInfo:'reader type: "
        "STRING not compatible with writer type: INT'}"
    )


def test_enum_fixed_and_name_rules() -> None:
    def enum(*symbols: str, default: str | None = None) -> object:
        e: dict[str, object] = {"type": "enum", "name": "E", "symbols": list(symbols)}
        if default:
            e["default"] = default
        return avro(e)

    assert ok("BACKWARD", enum("A", "B", "C"), enum("A", "B"))
    messages = check_compatibility("BACKWARD", enum("A"), [enum("A", "B", "C")])  # type: ignore
    assert "MISSING_ENUM_SYMBOLS" in messages[0] and "'[B, C]'" in messages[0]
    assert ok("BACKWARD", enum("A", "U", default="U"), enum("A", "B"))
    fixed4 = avro({"type": "fixed", "name": "F", "size": 4})
    assert (
        "FIXED_SIZE_MISMATCH"
        in check_compatibility(
            "BACKWARD",
            avro({"type": "fixed", "name": "F", "size": 8}),
            [fixed4],  # type: ignore
        )[0]
    )
    renamed = record({"type": "string", "name": "f1"}, name="other")
    assert "NAME_MISMATCH" in check_compatibility("BACKWARD", renamed, [S1])[0]  # type: ignore
    aliased = avro(
        {"type": "record", "name": "other", "aliases": ["myrecord"], "fields": [
            {"type": "string", "name": "f1"}]}
    )  # fmt: skip
    assert ok("BACKWARD", aliased, S1)


@pytest.mark.parametrize("writer", ["null", "boolean", "int", "long", "float", "double",
                                    "bytes", "string"])  # fmt: skip
def test_promotions_table(writer: str) -> None:
    for reader in ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]:
        readable = reader == writer or reader in PROMOTIONS.get(writer, frozenset())
        assert ok("BACKWARD", avro(reader), avro(writer)) == readable, (reader, writer)


def test_canonical_is_avros_tostring_layout() -> None:
    text = json.dumps({
        "namespace": "com.acme", "name": "User", "type": "record", "doc": "a user",
        "fields": [
            {"type": "int", "name": "id", "custom": 1},
            {"name": "tags", "type": {"items": "string", "type": "array"}, "default": []},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A"]}},
            {"name": "other", "type": {"type": "enum", "name": "x.K", "symbols": ["B"]}},
            {"name": "again", "type": "Kind"},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    })  # fmt: skip
    schema = parse_schema("AVRO", text)
    assert schema.canonical() == (
        '{"type":"record","name":"User","namespace":"com.acme","doc":"a user","fields":['
        '{"name":"id","type":"int","custom":1},'
        '{"name":"tags","type":{"type":"array","items":"string"},"default":[]},'
        '{"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A"]}},'
        '{"name":"other","type":{"type":"enum","name":"K","namespace":"x","symbols":["B"]}},'
        '{"name":"again","type":"Kind"},'
        '{"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}'
    )
    assert parse_schema("AVRO", '{"type": "string"}').canonical() == '"string"'
    assert schema.deep_equals(parse_schema("AVRO", schema.canonical()))
    assert not schema.deep_equals(S1)  # type: ignore[arg-type]
    normalized = schema.normalized()
    assert normalized.deep_equals(parse_schema("AVRO", schema.canonical()).normalized())


def test_references_are_named_types_of_other_schemas() -> None:
    address = '{"type":"record","name":"Address","namespace":"a","fields":[' \
        '{"name":"street","type":"string"}]}'  # fmt: skip
    stored = {("address", 1): ("AVRO", address, [])}
    user = json.dumps({"type": "record", "name": "User", "namespace": "a", "fields": [
        {"name": "home", "type": "Address"}, {"name": "work", "type": "a.Address"}]})  # fmt: skip
    refs = resolve_references(
        [Reference("a.Address", "address", 1)], lambda s, v: stored.get((s, v))
    )
    parsed = parse_schema("AVRO", user, refs)
    assert parsed.canonical() == (
        '{"type":"record","name":"User","namespace":"a","fields":['
        '{"name":"home","type":"Address"},{"name":"work","type":"Address"}]}'
    )
    with pytest.raises(InvalidSchemaError):
        parse_schema("AVRO", user)  # Address unknown without the reference
    with pytest.raises(InvalidSchemaError):
        resolve_references([Reference("a.Address", "address", 2)], lambda s, v: stored.get((s, v)))
    cycle = {("x", 1): ("AVRO", '"int"', [Reference("y", "y", 1)]),
             ("y", 1): ("AVRO", '"int"', [Reference("x", "x", 1)])}  # fmt: skip
    with pytest.raises(InvalidSchemaError, match="Circular"):
        resolve_references([Reference("x", "x", 1)], lambda s, v: cycle.get((s, v)))
    assert isinstance(refs[0], ResolvedReference)
    resolved = parsed.formatted("resolved")
    assert '"type":{"type":"record","name":"Address"' in resolved
    assert parse_schema("AVRO", resolved).canonical() == resolved
    assert parsed.formatted(None) == parsed.canonical()


@pytest.mark.parametrize("text", [
    "{", '{"type":"record","name":"R"}', '{"type":"nope"}', '"Missing"', "[]x",
    '{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}',
    '{"type":"enum","name":"E","symbols":["A","A"]}', "[" * 5000 + "]" * 5000,
    '{"type":"array","items":' * 250 + '"int"' + "}" * 250,
])  # fmt: skip
def test_unparsable_schemas_are_invalid(text: str) -> None:
    with pytest.raises(InvalidSchemaError) as raised:
        parse_schema("AVRO", text)
    assert raised.value.error_code == 42201


_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_primitive = st.sampled_from(["null", "boolean", "int", "long", "float", "double", "bytes",
                              "string"])  # fmt: skip
_type = st.recursive(
    _primitive,
    lambda inner: st.one_of(
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda t: {"type": "map", "values": t}, inner),
    ),
    max_leaves=4,
)


@st.composite
def _records(draw: st.DrawFn) -> str:
    names = draw(st.lists(_names, min_size=1, max_size=5, unique=True))
    fields = [{"name": n, "type": draw(_type)} for n in names]
    return json.dumps({"type": "record", "name": "R", "namespace": "n", "fields": fields})


@settings(max_examples=60, deadline=None)
@given(_records(), _records())
def test_round_trip_and_self_compatibility(a: str, b: str) -> None:
    schema = parse_schema("AVRO", a)
    again = parse_schema("AVRO", schema.canonical())
    assert again.canonical() == schema.canonical() and again.deep_equals(schema)
    for level in COMPATIBILITY_LEVELS:
        assert check_compatibility(level, schema, [schema]) == []
    other = parse_schema("AVRO", b)
    full = check_compatibility("FULL", other, [schema]) == []
    both = (
        check_compatibility("BACKWARD", other, [schema]) == []
        and check_compatibility("FORWARD", other, [schema]) == []
    )
    assert full == both


def test_parsed_schemas_without_references_are_cached() -> None:
    text = '{"type":"record","name":"Cached","fields":[{"name":"a","type":"int"}]}'
    assert parse_schema("AVRO", text) is parse_schema("AVRO", text)
    assert parse_schema("JSON", "{}").schema_type == "JSON"
    assert parse_schema("AVRO", '"int"') is not parse_schema("AVRO", '"long"')
    with pytest.raises(InvalidSchemaError):
        parse_schema("XML", text)
