"""The `_schemas` records and the registry's state model: Confluent's bytes, and a replay of
the records equals the state after the same calls (hypothesis), ids never reused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.schema_registry import errors
from logstore.schema_registry.records import (
    ConfigValue,
    Key,
    SchemaRef,
    SchemaValue,
    decode_key,
    decode_value,
    encode_record,
)
from logstore.schema_registry.state import RegistryState, identity

# Records exactly as Confluent Schema Registry writes them to `_schemas`.
CONFLUENT_DUMP = [
    (b'{"keytype":"NOOP","magic":0}', None),
    (b'{"keytype":"CONFIG","subject":null,"magic":0}', b'{"compatibilityLevel":"FULL"}'),
    (
        b'{"keytype":"SCHEMA","subject":"orders-value","version":1,"magic":1}',
        b'{"subject":"orders-value","version":1,"id":1,'
        b'"schema":"{\\"type\\":\\"record\\",\\"name\\":\\"Order\\",\\"fields\\":'
        b'[{\\"name\\":\\"id\\",\\"type\\":\\"long\\"}]}","deleted":false}',
    ),
    (
        b'{"keytype":"SCHEMA","subject":"users-value","version":1,"magic":1}',
        b'{"subject":"users-value","version":1,"id":2,"schemaType":"JSON",'
        b'"schema":"{\\"type\\":\\"object\\"}","deleted":false}',
    ),
    (
        b'{"keytype":"SCHEMA","subject":"with-ref","version":1,"magic":1}',
        b'{"subject":"with-ref","version":1,"id":3,"schemaType":"PROTOBUF",'
        b'"references":[{"name":"u.proto","subject":"users-value","version":1}],'
        b'"schema":"syntax = \\"proto3\\";","deleted":false}',
    ),
    (b'{"keytype":"MODE","subject":"orders-value","magic":0}', b'{"mode":"READONLY"}'),
    (b'{"keytype":"CONFIG","subject":"orders-value","magic":0}', b'{"compatibilityLevel":"NONE"}'),
    (
        b'{"keytype":"SCHEMA","subject":"gone","version":1,"magic":1}',
        b'{"subject":"gone","version":1,"id":4,"schema":"\\"string\\"","deleted":false}',
    ),
    (b'{"keytype":"DELETE_SUBJECT","subject":"gone","magic":0}', b'{"subject":"gone","version":1}'),
    (b'{"keytype":"SCHEMA","subject":"gone","version":1,"magic":1}', None),
]


def test_a_confluent_dump_loads_and_writes_back_byte_for_byte():
    state = RegistryState()
    for raw_key, raw_value in CONFLUENT_DUMP:
        key = decode_key(raw_key)
        value = decode_value(key, raw_value)
        assert encode_record(key, value) == (raw_key, raw_value)
        state.apply(key, value)
    assert state.subject_names() == ["orders-value", "users-value", "with-ref"]
    assert state.compatibility(None) == "FULL"
    assert state.compatibility("orders-value") == "NONE"
    assert state.mode("orders-value") == "READONLY"
    assert state.schema_by_id(2).schema_type == "JSON"
    assert state.schema_by_id(3).references == (SchemaRef("u.proto", "users-value", 1),)
    assert state.referenced_by("users-value", 1) == [3]
    assert state.max_id == 4
    with pytest.raises(errors.SchemaNotFoundError):
        state.schema_by_id(4)
    # the next schema gets 5 even though 4 was permanently deleted
    records, new_id = state.plan_register("x", "AVRO", '"int"')
    assert new_id == 5


def test_unknown_fields_and_orders_are_read():
    key = decode_key(b'{"magic":1,"version":2,"subject":"s","keytype":"SCHEMA"}')
    assert key == Key("SCHEMA", "s", 2)
    value = decode_value(
        key,
        b'{"schema":"\\"int\\"","id":7,"md5":[1,2],"metadata":null,"ruleSet":null,'
        b'"version":2,"subject":"s","deleted":true}',
    )
    assert value == SchemaValue("s", 2, 7, '"int"', "AVRO", (), True)
    assert decode_value(Key("CONFIG", None), b'{"compatibilityLevel":"NONE","normalize":true}') == (
        ConfigValue("NONE", True)
    )


MODES = ["READWRITE", "READONLY"]
SUBJECTS = st.sampled_from(["a", "b", "c"])
TEXTS = st.sampled_from(['"int"', '"long"', '"string"', '"bytes"'])
OPS = st.one_of(
    st.tuples(st.just("register"), SUBJECTS, TEXTS),
    st.tuples(st.just("delete_version"), SUBJECTS, st.integers(1, 4), st.booleans()),
    st.tuples(st.just("delete_subject"), SUBJECTS, st.booleans()),
    st.tuples(st.just("config"), st.one_of(st.none(), SUBJECTS), st.sampled_from(["NONE", "FULL"])),
    st.tuples(st.just("mode"), st.one_of(st.none(), SUBJECTS), st.sampled_from(MODES)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_replay_equals_the_state_after_the_calls_and_ids_are_never_reused(ops):
    state = RegistryState()
    log = []
    named: dict[int, tuple] = {}  # every id ever handed out -> its schema
    high = 0
    for op in ops:
        try:
            if op[0] == "register":
                _, subject, text = op
                ident = identity("AVRO", text, ())
                if state.find(subject, ident) is not None:
                    continue
                records, schema_id = state.plan_register(subject, "AVRO", text)
                assert named.setdefault(schema_id, ident) == ident
                if schema_id > high:
                    assert schema_id == high + 1
                    high = schema_id
            elif op[0] == "delete_version":
                records, _ = state.plan_delete_version(op[1], op[2], op[3])
            elif op[0] == "delete_subject":
                records, _ = state.plan_delete_subject(op[1], op[2])
            elif op[0] == "config":
                records = state.plan_config(op[1], op[2], None)
            else:
                records = state.plan_mode(op[1], op[2])
        except errors.SchemaRegistryError:
            continue
        for key, value in records:
            raw = encode_record(key, value)
            log.append(raw)
            state.apply(key, value)
    replayed = RegistryState()
    for raw_key, raw_value in log:
        key = decode_key(raw_key)
        replayed.apply(key, decode_value(key, raw_value))
    assert replayed == state
    # the last record per key (what compaction keeps) rebuilds the same subjects and ids
    compacted = RegistryState()
    last = {}
    for raw_key, raw_value in log:
        last.pop(raw_key, None)
        last[raw_key] = raw_value
    for raw_key, raw_value in last.items():
        key = decode_key(raw_key)
        compacted.apply(key, decode_value(key, raw_value))
    assert compacted.subjects == state.subjects
    assert compacted.configs == state.configs and compacted.modes == state.modes


def test_import_mode_keeps_the_given_ids_and_versions():
    state = RegistryState()
    with pytest.raises(errors.OperationNotPermittedError):
        state.plan_register("s", "AVRO", '"int"', schema_id=40)
    state.apply_all(state.plan_mode(None, "IMPORT"))
    records, sid = state.plan_register("s", "AVRO", '"int"', schema_id=40, version=5)
    state.apply_all(records)
    assert sid == 40 and state.get_version("s", 5).id == 40
    with pytest.raises(errors.OperationNotPermittedError):  # 40 names another schema
        state.plan_register("t", "AVRO", '"long"', schema_id=40)
    with pytest.raises(errors.OperationNotPermittedError):  # version 5 is taken
        state.plan_register("s", "AVRO", '"long"', schema_id=41, version=5)
    state.apply_all(state.plan_mode(None, "READWRITE"))
    assert state.plan_register("t", "AVRO", '"long"')[1] == 41
    assert state.plan_register("t", "AVRO", '"int"')[1] == 40  # the same schema, its id
