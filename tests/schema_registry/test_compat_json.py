"""JSON Schema: parsing (meta-schema per draft, $ref resolution, references) and Confluent's
compatibility rules (content models, types, bounds, combined schemas) with its messages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.schema_registry.errors import InvalidSchemaError
from logstore.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    Reference,
    check_compatibility,
    parse_schema,
    resolve_references,
)
from logstore.schema_registry.schemas.json_compat import COMPATIBLE_CHANGES, differences
from logstore.schema_registry.schemas.json_schema import JsonSchema


def js(obj: Any) -> JsonSchema:
    schema = parse_schema("JSON", json.dumps(obj))
    assert isinstance(schema, JsonSchema)
    return schema


def changes(original: Any, update: Any) -> list[str]:
    o, u = js(original), js(update)
    return sorted(f"{d.type} {d.path}" for d in differences(o.root, o.loader, u.root, u.loader))


def obj(props: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, **extra}


STR, INT, NUM = {"type": "string"}, {"type": "integer"}, {"type": "number"}
CLOSED = {"additionalProperties": False}

# (original, update, the differences found, backward compatible)
CASES: list[tuple[str, Any, Any, list[str], bool]] = [
    ("anything may become the empty schema", obj({}), {}, [], True),
    ("integer widened to number", INT, NUM, ["TYPE_EXTENDED #/"], True),
    ("number narrowed to integer", NUM, INT, ["TYPE_NARROWED #/"], False),
    ("string to integer", STR, INT, ["TYPE_CHANGED #/"], False),
    ("maxLength raised", {**STR, "maxLength": 5}, {**STR, "maxLength": 9},
     ["MAX_LENGTH_INCREASED #/maxLength"], True),
    ("maxLength lowered", {**STR, "maxLength": 9}, {**STR, "maxLength": 5},
     ["MAX_LENGTH_DECREASED #/maxLength"], False),
    ("minimum added", NUM, {**NUM, "minimum": 1}, ["MINIMUM_ADDED #/minimum"], False),
    ("pattern removed", {**STR, "pattern": "a+"}, STR, ["PATTERN_REMOVED #/pattern"], True),
    ("enum extended", {"enum": ["a"]}, {"enum": ["a", "b"]}, ["ENUM_ARRAY_EXTENDED #/enum"], True),
    ("enum narrowed", {"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED #/enum"],
     False),
    ("optional property added to a closed model", obj({}, **CLOSED), obj({"a": STR}, **CLOSED),
     ["OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/a"], True),
    ("required property added to a closed model", obj({}, **CLOSED),
     obj({"a": STR}, required=["a"], **CLOSED),
     ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/a"], False),
    ("required property with a default added to a closed model", obj({}, **CLOSED),
     obj({"a": {**STR, "default": "x"}}, required=["a"], **CLOSED),
     ["REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL #/properties/a"], True),
    ("property added to an open model", obj({}), obj({"a": STR}),
     ["OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL #/properties/a"], False),
    ("property with an empty schema added to an open model", obj({}), obj({"a": {}}),
     ["PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL #/properties/a"], True),
    ("property removed from an open model", obj({"a": STR}), obj({}),
     ["PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL #/properties/a"], True),
    ("property removed from a closed model", obj({"a": STR}, **CLOSED), obj({}, **CLOSED),
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL #/properties/a"], False),
    ("property removed, covered by additionalProperties",
     obj({"a": STR}, additionalProperties=STR), obj({}, additionalProperties=STR),
     ["PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/a"], True),
    ("property removed, not covered by additionalProperties",
     obj({"a": INT}, additionalProperties=STR), obj({}, additionalProperties=STR),
     ["PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL #/properties/a",
      "TYPE_CHANGED #/properties/a"], False),
    ("model closed", obj({}), obj({}, **CLOSED),
     ["ADDITIONAL_PROPERTIES_REMOVED #/additionalProperties"], False),
    ("model opened", obj({}, **CLOSED), obj({}),
     ["ADDITIONAL_PROPERTIES_ADDED #/additionalProperties"], True),
    ("required dropped", obj({"a": STR}, required=["a"]), obj({"a": STR}),
     ["REQUIRED_ATTRIBUTE_REMOVED #/required/a"], True),
    ("required added", obj({"a": STR}), obj({"a": STR}, required=["a"]),
     ["REQUIRED_ATTRIBUTE_ADDED #/required/a"], False),
    ("a type becomes a union with it", STR, {"oneOf": [STR, INT]},
     ["SUM_TYPE_EXTENDED #/"], True),
    ("a union loses a branch", {"oneOf": [STR, INT]}, {"oneOf": [STR]},
     ["SUM_TYPE_NARROWED #/"], False),
    ("a union gains a branch", {"anyOf": [STR]}, {"anyOf": [STR, INT]},
     ["SUM_TYPE_EXTENDED #/"], True),
    ("oneOf to allOf", {"oneOf": [STR, INT]}, {"allOf": [STR, INT]},
     ["COMBINED_TYPE_CHANGED #/"], False),
    ("array items widened", {"type": "array", "items": INT}, {"type": "array", "items": NUM},
     ["TYPE_EXTENDED #/items"], True),
    ("uniqueItems added", {"type": "array"}, {"type": "array", "uniqueItems": True},
     ["UNIQUE_ITEMS_ADDED #/uniqueItems"], False),
]  # fmt: skip


@pytest.mark.parametrize(("original", "update", "found", "compatible"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_confluent_rules(original: Any, update: Any, found: list[str], compatible: bool) -> None:
    assert changes(original, update) == sorted(found)
    assert all(f.split()[0] in COMPATIBLE_CHANGES for f in found) == compatible
    result = check_compatibility("BACKWARD", js(update), [js(original)])
    assert (result == []) == compatible
    # FORWARD is the same rule with the schemas swapped
    swapped = check_compatibility("FORWARD", js(original), [js(update)])
    assert (swapped == []) == compatible


def test_messages_are_confluents() -> None:
    old = js(obj({"a": STR}, **CLOSED))
    new = js(obj({"a": INT, "b": STR}, required=["b"], **CLOSED))
    assert check_compatibility("BACKWARD", new, [old], [3]) == [
        '{errorType:"TYPE_CHANGED", description:"A type at path \'#/properties/a\' is different '
        "between the new schema and the old schema'}",
        '{errorType:"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", description:"The new '
        "schema has an unopen content model and has a required property at path "
        "'#/properties/b' which is missing in the old schema'}",
        "{oldSchemaVersion: 3}",
        "{oldSchema: '" + old.canonical() + "'}",
    ]


def test_recursive_schemas_compare() -> None:
    tree = {
        "$ref": "#/definitions/node",
        "definitions": {
            "node": obj(
                {
                    "value": INT,
                    "children": {"type": "array", "items": {"$ref": "#/definitions/node"}},
                }
            )
        },
    }
    wider = json.loads(json.dumps(tree).replace('"integer"', '"number"'))  # fmt: skip
    assert changes(tree, wider) == ["TYPE_EXTENDED #/properties/value"]
    assert check_compatibility("FULL", js(tree), [js(tree)]) == []
    assert check_compatibility("BACKWARD", js(wider), [js(tree)]) == []
    assert check_compatibility("FORWARD", js(wider), [js(tree)]) != []


def test_references_and_refs() -> None:
    address = json.dumps(obj({"street": STR}))
    stored = {("address", 1): ("JSON", address, [])}
    refs = resolve_references([Reference("address.json", "address", 1)],
                              lambda s, v: stored.get((s, v)))  # fmt: skip
    text = json.dumps(obj({"home": {"$ref": "address.json"}}))
    user = parse_schema("JSON", text, refs)
    assert user.canonical() == text.replace(" ", "")
    with pytest.raises(InvalidSchemaError):
        parse_schema("JSON", text)  # address.json unresolved without the reference
    widened = parse_schema("JSON", json.dumps(obj({"home": {}})))
    assert check_compatibility("BACKWARD", widened, [user]) == []


@pytest.mark.parametrize("text", [
    "{", "[]", "3", '{"type": "strin"}', '{"type": "object", "required": "a"}',
    '{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": 3}',
    '{"$ref": "#/definitions/missing"}', '{"minLength": -1}',
])  # fmt: skip
def test_unparsable_schemas_are_invalid(text: str) -> None:
    with pytest.raises(InvalidSchemaError) as raised:
        parse_schema("JSON", text)
    assert raised.value.error_code == 42201


def test_keywords_of_other_drafts_are_not_schemas() -> None:
    # draft 7 has no prefixItems or unevaluatedItems: their values are unchecked
    old, new = js({"prefixItems": None}), js({"prefixItems": [None], "unevaluatedItems": 3})
    for level in COMPATIBILITY_LEVELS:
        assert check_compatibility(level, new, [old]) == []
    modern = "https://json-schema.org/draft/2020-12/schema"
    opened, closed = {"$schema": modern, **obj({})}, {"unevaluatedProperties": False}
    assert changes(opened, {**opened, **closed}) == [
        "UNEVALUATED_PROPERTIES_REMOVED #/unevaluatedProperties"
    ]
    assert changes({**opened, **closed}, opened) == [
        "UNEVALUATED_PROPERTIES_ADDED #/unevaluatedProperties"
    ]


def test_drafts_and_normalization() -> None:
    for draft in ("http://json-schema.org/draft-04/schema#",
                  "http://json-schema.org/draft-06/schema#",
                  "http://json-schema.org/draft-07/schema#",
                  "https://json-schema.org/draft/2019-09/schema",
                  "https://json-schema.org/draft/2020-12/schema"):  # fmt: skip
        assert js({"$schema": draft, **obj({"a": STR})}).canonical().startswith('{"$schema"')
    a = js({"type": "object", "properties": {"b": STR, "a": INT}})
    b = js({"properties": {"a": INT, "b": STR}, "type": "object"})
    assert not a.deep_equals(b) and a.normalized().deep_equals(b.normalized())
    assert check_compatibility("BACKWARD", a, [parse_schema("AVRO", '"string"')]) == [
        "Incompatible because of different schema type"
    ]


_leaf = st.sampled_from([STR, INT, NUM, {"type": "boolean"}, {"enum": ["a", "b"]},
                         {**STR, "maxLength": 3}, {}])  # fmt: skip


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda p, c: obj(p, **(CLOSED if c else {})),
                  st.dictionaries(st.sampled_from("abc"), inner, max_size=3), st.booleans()),
        st.builds(lambda t: {"type": "array", "items": t}, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
    )  # fmt: skip


_schema = st.recursive(_leaf, _extend, max_leaves=6)


@settings(max_examples=80, deadline=None)
@given(_schema, _schema)
def test_self_compatible_and_full_is_both(a: Any, b: Any) -> None:
    x, y = js(a), js(b)
    assert parse_schema("JSON", x.canonical()).deep_equals(x)
    for level in COMPATIBILITY_LEVELS:
        assert check_compatibility(level, x, [x]) == []
    backward = check_compatibility("BACKWARD", y, [x]) == []
    forward = check_compatibility("FORWARD", y, [x]) == []
    assert (check_compatibility("FULL", y, [x]) == []) == (backward and forward)
