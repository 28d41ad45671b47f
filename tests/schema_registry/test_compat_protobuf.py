"""PROTOBUF schemas: parsing and checks of .proto text, references as imports, and
Confluent's Protobuf compatibility rules (field numbers, wire-compatible types, messages,
enums, oneofs, packages) with its messages."""

from __future__ import annotations

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
from logstore.schema_registry.schemas.protobuf import ProtobufSchema
from logstore.schema_registry.schemas.protobuf_compat import (
    COMPATIBLE_CHANGES,
    SCALAR_KINDS,
    differences,
)


def proto(body: str, package: str = "", syntax: str = "proto3") -> ProtobufSchema:
    head = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    schema = parse_schema("PROTOBUF", head + body)
    assert isinstance(schema, ProtobufSchema)
    return schema


def changes(original: str, update: str, **kw: str) -> list[str]:
    return sorted(f"{d.type} {d.path}" for d in differences(proto(original, **kw),
                                                            proto(update, **kw)))  # fmt: skip


BASE = "message M { string a = 1; int32 b = 2; }"

# (original, update, the differences found, backward compatible)
CASES: list[tuple[str, str, str, list[str], bool]] = [
    ("a field added", BASE, "message M { string a = 1; int32 b = 2; bool c = 3; }",
     ["FIELD_ADDED #/M/3"], True),
    ("a field removed", BASE, "message M { string a = 1; }", ["FIELD_REMOVED #/M/2"], True),
    ("a field renamed", BASE, "message M { string a = 1; int32 bee = 2; }",
     ["FIELD_NAME_CHANGED #/M/2"], True),
    ("int32 to int64 (same wire type)", BASE, "message M { string a = 1; int64 b = 2; }", [],
     True),
    ("int32 to sint32", BASE, "message M { string a = 1; sint32 b = 2; }",
     ["FIELD_SCALAR_KIND_CHANGED #/M/2"], False),
    ("string to bytes", BASE, "message M { bytes a = 1; int32 b = 2; }", [], True),
    ("scalar to message", BASE, "message M { N a = 1; int32 b = 2; } message N {}",
     ["FIELD_KIND_CHANGED #/M/1", "MESSAGE_ADDED #/N"], False),
    ("int32 to an enum", BASE, "message M { string a = 1; E b = 2; } enum E { Z = 0; }",
     ["ENUM_ADDED #/E"], True),
    ("a message removed", BASE + " message N {}", BASE, ["MESSAGE_REMOVED #/N"], False),
    ("messages reordered", BASE + " message N {}", "message N {} " + BASE,
     ["MESSAGE_MOVED #/M", "MESSAGE_MOVED #/N"], True),
    ("an enum value added", "enum E { A = 0; }", "enum E { A = 0; B = 1; }",
     ["ENUM_CONST_ADDED #/E/1"], True),
    ("a field moved into a new oneof", BASE,
     "message M { oneof o { string a = 1; } int32 b = 2; }", ["ONEOF_ADDED #/M/o"], True),
    ("two fields moved into one oneof", BASE,
     "message M { oneof o { string a = 1; int32 b = 2; } }",
     ["MULTIPLE_FIELDS_MOVED_TO_ONEOF #/M/o", "ONEOF_ADDED #/M/o"], False),
    ("a field moved into an existing oneof", "message M { oneof o { string a = 1; } int32 b = 2; }",
     "message M { oneof o { string a = 1; int32 b = 2; } }",
     ["FIELD_MOVED_TO_EXISTING_ONEOF #/M/o"], False),
    ("a oneof member removed", "message M { oneof o { string a = 1; int32 b = 2; } }",
     "message M { oneof o { string a = 1; } }", ["ONEOF_FIELD_REMOVED #/M/o/2"], False),
    ("a whole oneof removed", "message M { oneof o { string a = 1; int32 b = 2; } }",
     "message M { }", ["ONEOF_REMOVED #/M/o"], True),
    ("a oneof member moved to the top level", "message M { oneof o { string a = 1; } }",
     "message M { string a = 1; }",
     ["ONEOF_FIELD_MOVED_TO_TOP_LEVEL #/M/1", "ONEOF_REMOVED #/M/o"], True),
    ("a nested message's field retyped", "message M { message N { int32 x = 1; } N n = 1; }",
     "message M { message N { double x = 1; } N n = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED #/M/N/1"], False),
    ("a map's value retyped", "message M { map<string, int32> m = 1; }",
     "message M { map<string, string> m = 1; }", ["FIELD_SCALAR_KIND_CHANGED #/M/1"], False),
]  # fmt: skip


@pytest.mark.parametrize(("original", "update", "found", "compatible"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])  # fmt: skip
def test_confluent_rules(original: str, update: str, found: list[str], compatible: bool) -> None:
    assert changes(original, update) == sorted(found)
    assert all(f.split()[0] in COMPATIBLE_CHANGES for f in found) == compatible
    assert (check_compatibility("BACKWARD", proto(update), [proto(original)]) == []) == compatible


def test_proto2_labels_and_required_fields() -> None:
    old = "message M { optional int32 a = 1; required string b = 2; }"
    assert changes(old, "message M { repeated int32 a = 1; required string b = 2; }",
                   syntax="proto2") == ["FIELD_NUMERIC_LABEL_CHANGED #/M/1"]  # fmt: skip
    assert changes(old, "message M { optional int32 a = 1; }", syntax="proto2") == [
        "REQUIRED_FIELD_REMOVED #/M/2"
    ]
    assert changes(old, old.replace("}", "required bool c = 3; }"), syntax="proto2") == [
        "REQUIRED_FIELD_ADDED #/M/3"
    ]


def test_package_change_and_messages() -> None:
    old, new = proto(BASE, package="a.b"), proto(BASE, package="a.c")
    assert check_compatibility("BACKWARD", new, [old], [7]) == [
        '{errorType:"PACKAGE_CHANGED", description:"The package at \'#/\' in the new schema '
        'does not match the package in the old schema"}',
        "{oldSchemaVersion: 7}",
        "{oldSchema: '" + old.canonical() + "'}",
    ]
    removed = check_compatibility("FORWARD", proto(BASE + " message N {}"), [proto(BASE)])
    assert removed[0] == (
        '{errorType:"MESSAGE_REMOVED", description:"The old schema is missing a MESSAGE type '
        "at path '#/N' in the new schema\"}"
    )


def test_references_are_imports() -> None:
    money_v1 = 'syntax = "proto3";\npackage fin;\nmessage Money { int64 units = 1; }\n'
    money_v2 = 'syntax = "proto3";\npackage fin;\nmessage Money { string units = 1; }\n'
    stored = {("money", 1): ("PROTOBUF", money_v1, []), ("money", 2): ("PROTOBUF", money_v2, [])}
    text = 'syntax = "proto3";\nimport "money.proto";\nmessage Order { fin.Money total = 1; }\n'

    def parsed(version: int) -> ProtobufSchema:
        refs = resolve_references([Reference("money.proto", "money", version)],
                                  lambda s, v: stored.get((s, v)))  # fmt: skip
        schema = parse_schema("PROTOBUF", text, refs)
        assert isinstance(schema, ProtobufSchema)
        return schema

    v1, v2 = parsed(1), parsed(2)
    assert check_compatibility("BACKWARD", v1, [v1]) == []
    found = sorted(f"{d.type} {d.path}" for d in differences(v1, v2))
    assert found == ["FIELD_NAMED_TYPE_CHANGED #/Order/1", "FIELD_SCALAR_KIND_CHANGED #/Money/1"]
    with pytest.raises(InvalidSchemaError, match="no reference"):
        parse_schema("PROTOBUF", text)
    assert not v1.deep_equals(v2) and v1.deep_equals(parsed(1))


@pytest.mark.parametrize("text", [
    "message {", 'syntax = "proto3"; message M { string a = 1; int32 b = 1; }',
    'syntax = "proto3"; message M { Missing a = 1; }',
    'syntax = "proto3"; enum E { A = 1; }', 'syntax = "proto3"; message M { int32 a = 0; }',
    'syntax = "proto3"; message M { int32 a = 19000; }',
    'syntax = "proto3"; message M { map<double, int32> m = 1; }',
    'syntax = "proto3"; import "nowhere.proto";', 'syntax = "proto4";',
    'syntax = "proto3"; message M {} message M {}',
])  # fmt: skip
def test_unparsable_schemas_are_invalid(text: str) -> None:
    with pytest.raises(InvalidSchemaError) as raised:
        parse_schema("PROTOBUF", text)
    assert raised.value.error_code == 42201


def test_canonical_normalized_and_well_known_types() -> None:
    text = (
        'syntax = "proto3";\npackage acme;\nimport "google/protobuf/timestamp.proto";\n'
        "message Order { google.protobuf.Timestamp at = 1; Item item = 2; "
        "message Item { string sku = 1; } map<string, Item> by_id = 3; "
        "oneof pay { string card = 4; int64 cash = 5; } }"
    )
    schema = parse_schema("PROTOBUF", text)
    assert "  .acme.Order.Item item = 2;" in schema.normalized().canonical()
    assert "  Item item = 2;" in schema.canonical()
    again = parse_schema("PROTOBUF", schema.canonical())
    assert again.canonical() == schema.canonical() and again.deep_equals(schema)
    assert schema.normalized().deep_equals(again.normalized())


_scalar = st.sampled_from(sorted(SCALAR_KINDS))


@st.composite
def _messages(draw: st.DrawFn) -> str:
    numbers = draw(st.lists(st.integers(1, 20), min_size=1, max_size=6, unique=True))
    fields = " ".join(f"{draw(_scalar)} f{n} = {n};" for n in numbers)
    return f'syntax = "proto3";\nmessage M {{ {fields} }}\n'


@settings(max_examples=60, deadline=None)
@given(_messages(), _messages())
def test_self_compatible_and_wire_groups(a: str, b: str) -> None:
    x, y = parse_schema("PROTOBUF", a), parse_schema("PROTOBUF", b)
    for level in COMPATIBILITY_LEVELS:
        assert check_compatibility(level, x, [x]) == []
    assert isinstance(x, ProtobufSchema) and isinstance(y, ProtobufSchema)
    old = {f.number: f.type for f in x.model.types[0].fields}  # type: ignore[union-attr]
    new = {f.number: f.type for f in y.model.types[0].fields}  # type: ignore[union-attr]
    same_groups = all(SCALAR_KINDS[old[n]] == SCALAR_KINDS[new[n]] for n in old.keys() & new)
    assert (check_compatibility("BACKWARD", y, [x]) == []) == same_groups


def test_confluent_clients_descriptor_forms() -> None:
    """What confluent-kafka's ProtobufSerializer registers (a base64 FileDescriptorProto)
    parses, and `format=serialized` builds a descriptor pool that decodes its messages."""
    from confluent_kafka.schema_registry.common.protobuf import (
        _init_pool,
        _schema_to_str,
        _str_to_proto,
    )
    from google.protobuf import descriptor_pool, message_factory, timestamp_pb2

    from logstore.schema_registry.schemas.protobuf_descriptor import to_descriptor

    text = (
        'syntax = "proto3";\npackage shop.v1;\nimport "google/protobuf/timestamp.proto";\n'
        "message Order { string id = 1; repeated Item items = 2; map<string, int64> counts = 3;"
        " optional int32 priority = 4; oneof payment { string card = 5; Cash cash = 6; }"
        " google.protobuf.Timestamp at = 7; Status status = 8;"
        " message Item { string sku = 1; double price = 2; } enum Status { NEW = 0; PAID = 1; } }"
        "\nmessage Cash { int64 cents = 1; }\n"
    )
    schema = parse_schema("PROTOBUF", text)
    assert isinstance(schema, ProtobufSchema)

    def pool_with(descriptor: object) -> descriptor_pool.DescriptorPool:
        pool = descriptor_pool.DescriptorPool()
        _init_pool(pool)
        pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
        pool.Add(descriptor)
        return pool

    written = to_descriptor(schema)
    written.name = "order.proto"
    pool = pool_with(written)
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.v1.Order"))
    order = order_class(id="o1", counts={"a": 2}, priority=3, cash={"cents": 5}, status=1)
    order.items.add(sku="x", price=1.5)

    registered = parse_schema("PROTOBUF", _schema_to_str(pool.FindFileByName("order.proto")))
    assert "optional int32 priority = 4;" in registered.canonical()
    assert "map<string, int64> counts = 3;" in registered.canonical()
    assert check_compatibility("FULL", registered, [schema]) == []

    served = _str_to_proto("default", registered.formatted("serialized"))
    reader_class = message_factory.GetMessageClass(
        pool_with(served).FindMessageTypeByName("shop.v1.Order")
    )
    decoded = reader_class.FromString(order.SerializeToString())
    assert decoded.id == "o1" and dict(decoded.counts) == {"a": 2}
    assert decoded.HasField("priority") and decoded.WhichOneof("payment") == "cash"
    assert decoded.items[0].price == 1.5 and decoded.status == 1
    with pytest.raises(InvalidSchemaError):
        parse_schema("PROTOBUF", "bm90IGEgZGVzY3JpcHRvcg==")  # base64 of other bytes


def test_canonical_text_is_a_fixed_point() -> None:
    text = (
        'syntax = "proto2";\npackage a.b;\nimport public "google/protobuf/descriptor.proto";\n'
        'option java_package = "com.x\\"y";\noption (my_opt) = { a: 1 b: "x" };\n'
        "message M {\n  option deprecated = true;\n"
        '  required string s = 2 [default = "q\\n\\"x\\\\"];\n'
        "  extensions 100 to max;\n  reserved 10, 20 to 30;\n"
        "  optional group G = 4 { optional int32 y = 5; message Deep { optional int32 z = 1; } }\n"
        "  enum E { option allow_alias = true; A = 0; B = 0 [deprecated = true]; }\n"
        "  map<int64, M> mm = 8 [deprecated = true];\n}\n"
        "extend M { optional int32 ext = 100; }\n"
        "service S { rpc Do (M) returns (stream M) { option deprecated = true; } }\n"
    )
    schema = parse_schema("PROTOBUF", text)
    canonical = schema.canonical()
    assert parse_schema("PROTOBUF", canonical).canonical() == canonical
    normalized = schema.normalized().canonical()
    assert parse_schema("PROTOBUF", normalized).normalized().canonical() == normalized
    for kept in (
        '[default = "q\\n\\"x\\\\"]',
        "optional group G = 4 {",
        "message Deep {",
        "B = 0 [deprecated = true];",
        "map<int64, M> mm = 8 [deprecated = true];",
    ):
        assert kept in canonical, kept  # fmt: skip
