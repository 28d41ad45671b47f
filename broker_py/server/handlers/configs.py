"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the apis.

Topic configs are described with every effective key, each with its source: a topic
override (TOPIC_CONFIG), a dynamic broker config of this broker
(DYNAMIC_BROKER_CONFIG) or of the cluster (DYNAMIC_DEFAULT_BROKER_CONFIG), a key set
in server.properties (STATIC_BROKER_CONFIG) or Kafka's default (DEFAULT_CONFIG), and
with the chain of synonyms when asked. A BROKER resource is this broker's id or
``""`` (the cluster-wide default); altering one changes its dynamic configs
(``broker_py.config.dynamic_broker_config``), and only keys Kafka lets change at runtime.
With an authorizer, describing needs DESCRIBE_CONFIGS and altering ALTER_CONFIGS, on the
topic or, for a broker or its loggers, on the cluster.

A CLIENT_METRICS resource (KIP-714) is a client telemetry subscription
(``broker_py.server.telemetry``): DESCRIBE_CONFIGS / ALTER_CONFIGS on the cluster, keys
checked as Kafka's ``ClientMetricsConfigs``, described with source CLIENT_METRICS_CONFIG.

A GROUP resource (Kafka 4) holds one group's overrides of the broker's group defaults
(``broker_py.coordinator.group.group_config_manager``): DESCRIBE_CONFIGS / ALTER_CONFIGS on
the group (GROUP_AUTHORIZATION_FAILED), keys checked as Kafka's ``GroupConfig``, every key
described, with source GROUP_CONFIG where the group sets it and DEFAULT_CONFIG elsewhere.

In a cluster a BROKER resource's configs live in ZooKeeper: any broker alters the
default's or any broker id's (``/config/brokers/<default>`` or ``<id>``, the response
waiting for the write), every broker applies the default's and its own when notified,
and each describes its own.
"""

from __future__ import annotations

import functools
import re

import logstore
from broker_py.config import group_config
from broker_py.config.dynamic_broker_config import validate_configs
from broker_py.config.kafka_config import DYNAMIC_KEYS, BrokerConfig, ConfigError, config_type
from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation, ResourceType
from broker_py.server import broker_loggers
from broker_py.server.config_admin_manager import broker_config_error
from broker_py.server.telemetry import client_metrics_configs
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    InvalidConfigError,
    InvalidRequestError,
    KafkaError,
    UnknownTopicOrPartitionError,
)
from logstore.protocol.messages.configs import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
CLIENT_METRICS = 16
GROUP = 32

SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_DYNAMIC_BROKER_LOGGER = 6
SOURCE_CLIENT_METRICS = 7
SOURCE_GROUP = 8

TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
)

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

TYPE_UNKNOWN = 0
# ConfigDef.Type name -> DescribeConfigs' config_type.
_TYPE_IDS = {
    "BOOLEAN": TYPE_BOOLEAN,
    "STRING": TYPE_STRING,
    "INT": TYPE_INT,
    "SHORT": TYPE_SHORT,
    "LONG": TYPE_LONG,
    "DOUBLE": TYPE_DOUBLE,
    "LIST": TYPE_LIST,
}


@functools.cache
def _types() -> dict[str, int]:
    """Topic configs' types, from the engine's table of Kafka's topic configs."""
    types = {name: _TYPE_IDS[kind] for name, kind, _default in logstore.topic_config_keys()}
    types["log.cleanup.policy"] = TYPE_LIST
    return types


def _type_of(key: str, value: str | None) -> int:
    if key in _types():
        return _types()[key]
    kind = config_type(key)
    if kind is not None:
        return _TYPE_IDS[kind]
    if key.endswith((".ms", ".bytes", ".messages")):
        return TYPE_LONG
    return TYPE_STRING


_SOURCES = {
    "dynamic_broker": SOURCE_DYNAMIC_BROKER,
    "dynamic_default": SOURCE_DYNAMIC_DEFAULT_BROKER,
    "static": SOURCE_STATIC_BROKER,
    "default": SOURCE_DEFAULT,
}


def _sensitive(name: str) -> bool:
    """Keys whose values (passwords, private keys) DescribeConfigs never shows, as Kafka's
    PASSWORD type."""
    return name.endswith(("sasl.jaas.config", ".password", "ssl.keystore.key"))


def _entry(
    name: str,
    value,
    source: int,
    read_only: bool = False,
    synonyms=(),
    config_type: int | None = None,
):
    sensitive = _sensitive(name)
    if sensitive:
        value = None
        synonyms = [
            DescribeConfigsResponse.DescribeConfigsSynonym(name=s.name, value=None, source=s.source)
            for s in synonyms
        ]
    return DescribeConfigsResponse.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        is_default=source == SOURCE_DEFAULT,  # v0's flag; v1+ carry config_source
        config_source=source,
        is_sensitive=sensitive,
        synonyms=list(synonyms),
        config_type=_type_of(name, value) if config_type is None else config_type,
        documentation=None,
    )


def _broker_synonyms(apis, broker_key: str) -> list:
    """The layers of a broker key, the effective one first, as DescribeConfigs synonyms."""
    return [
        DescribeConfigsResponse.DescribeConfigsSynonym(
            name=broker_key, value=value, source=_SOURCES[layer]
        )
        for layer, value in apis.config.layers(broker_key)
    ]


def _topic_entries(apis, topic, keys, include_synonyms):
    effective = apis.log_config_manager.effective_config(topic)
    out = []
    for key in sorted(effective):
        if keys is not None and key not in keys:
            continue
        value = effective[key]
        synonyms = []
        if key in topic.configs:
            synonyms.append(
                DescribeConfigsResponse.DescribeConfigsSynonym(
                    name=key, value=topic.configs[key], source=SOURCE_TOPIC
                )
            )
        for broker_key in BrokerConfig.synonyms_of(key):
            synonyms += _broker_synonyms(apis, broker_key)
        source = synonyms[0].source if synonyms else SOURCE_DEFAULT
        out.append(_entry(key, value, source, synonyms=synonyms if include_synonyms else ()))
    # Keys stored that are not topic configs (ignored): shown as stored, type UNKNOWN.
    for key in sorted(set(topic.configs) - set(effective)):
        if keys is None or key in keys:
            stored = DescribeConfigsResponse.DescribeConfigsSynonym(
                name=key, value=topic.configs[key], source=SOURCE_TOPIC
            )
            out.append(
                _entry(
                    key,
                    topic.configs[key],
                    SOURCE_TOPIC,
                    synonyms=[stored] if include_synonyms else (),
                    config_type=TYPE_UNKNOWN,
                )
            )
    return out


def _broker_entries(apis, resource: str, keys, include_synonyms):
    """This broker's every key (resource ``<id>``), or the cluster-wide dynamic
    defaults alone (resource ``""``), as Kafka describes them."""
    if resource == "":
        values = apis.config.dynamic_default
    else:
        values = apis.config.describe()
    out = []
    for key, value in sorted(values.items()):
        if keys is not None and key not in keys:
            continue
        synonyms = _broker_synonyms(apis, key)
        if resource == "":
            synonyms = [s for s in synonyms if s.source == SOURCE_DYNAMIC_DEFAULT_BROKER]
        source = synonyms[0].source if synonyms else SOURCE_DEFAULT
        out.append(
            _entry(
                key,
                value,
                source,
                read_only=key not in DYNAMIC_KEYS,
                synonyms=synonyms if include_synonyms else (),
            )
        )
    return out


def _is_this_broker(apis, name: str) -> bool:
    return name in ("", str(apis.broker_id))


def _ensure_allowed(
    apis, connection, operation: AclOperation, resource_type: int, name: str
) -> None:
    """A topic's configs need the operation on the topic, a group's on the group, a
    broker's and its loggers' on the cluster (TOPIC_ / GROUP_ / CLUSTER_AUTHORIZATION_FAILED)."""
    if resource_type == TOPIC:
        auth_helper.ensure(apis, connection, operation, ResourceType.TOPIC, name)
    elif resource_type == GROUP:
        auth_helper.ensure(apis, connection, operation, ResourceType.GROUP, name)
    elif resource_type in (BROKER, BROKER_LOGGER, CLIENT_METRICS):
        auth_helper.ensure(apis, connection, operation, ResourceType.CLUSTER)


def handle_describe_configs(apis, request, connection):
    body = request.body
    results = []
    for r in body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        result = DescribeConfigsResponse.DescribeConfigsResult(
            error_code=0,
            error_message=None,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=[],
        )
        try:
            _ensure_allowed(
                apis, connection, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name
            )
        except KafkaError as e:
            result.error_code, result.error_message = int(e.errno), str(e)
        if result.error_code:
            pass
        elif r.resource_type == TOPIC:
            topic = apis.metadata_cache.get(r.resource_name)
            if topic is None:
                result.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                result.error_message = f"topic {r.resource_name!r} does not exist"
            else:
                result.configs = _topic_entries(apis, topic, keys, body.include_synonyms)
        else:
            try:
                result.configs = _described(apis, r.resource_type, r.resource_name, keys, body)
            except KafkaError as e:
                result.error_code, result.error_message = int(e.errno), str(e)
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _broker_id_of(name: str) -> int:
    """Kafka's ``resourceNameToBrokerId``: Java's ``Integer.parseInt``."""
    if not re.fullmatch(r"[+-]?[0-9]+", name) or not -(1 << 31) <= int(name) < 1 << 31:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}")
    return int(name)


def _described(apis, resource_type: int, name: str, keys, body) -> list:
    """The entries of a BROKER, BROKER_LOGGER, CLIENT_METRICS or GROUP resource, or
    Kafka's ConfigHelper error for its name."""
    if resource_type == BROKER:
        if name and _broker_id_of(name) != apis.broker_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {apis.broker_id} or empty string, "
                f"but received {name}"
            )
        return _broker_entries(apis, name, keys, body.include_synonyms)
    if resource_type == BROKER_LOGGER:
        if not name:
            raise InvalidRequestError("Broker id must not be empty")
        if _broker_id_of(name) != apis.broker_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {apis.broker_id} but received {name}"
            )
        return [
            _entry(logger, level, SOURCE_DYNAMIC_BROKER_LOGGER, config_type=TYPE_STRING)
            for logger, level in broker_loggers.levels().items()
            if keys is None or logger in keys
        ]
    if resource_type in (CLIENT_METRICS, GROUP):
        entries = client_metrics_entries if resource_type == CLIENT_METRICS else group_entries
        return entries(apis, name, keys, body.include_synonyms)
    raise InvalidRequestError("Unsupported resource type: UNKNOWN")


def _apply(apis, resource_type: int, name: str, new_configs, validate_only: bool):
    """Applies the change; in a cluster a topic's change is a ZooKeeper write returned
    to be awaited."""
    if resource_type == TOPIC:
        if apis.metadata_cache.get(name) is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return apis.config_admin_manager.set_topic_configs(
            name, new_configs, validate_only=validate_only
        )
    elif resource_type == BROKER and apis.zk_support is not None:
        return _write_broker_configs(apis, name, new_configs, validate_only)
    elif resource_type == BROKER:
        apis.config_admin_manager.set_broker_configs(name, new_configs, validate_only=validate_only)
    elif resource_type == CLIENT_METRICS:
        return apis.client_telemetry.alter(name, lambda _: dict(new_configs), validate_only)
    elif resource_type == GROUP:
        return apis.group_configs.alter(name, lambda _: dict(new_configs), validate_only)
    elif resource_type == BROKER_LOGGER:
        raise InvalidRequestError("broker logger levels are changed with IncrementalAlterConfigs")
    else:
        raise InvalidRequestError(f"unknown resource type {resource_type}")


def _broker_id_or_default(name: str) -> str:
    """A BROKER resource name in a cluster: ``""`` (the default) or a broker id."""
    if name != "" and not (name.isdigit() and int(name) < 1 << 31):
        raise InvalidRequestError(f"broker id must be an integer, but it is: {name!r}")
    return name if name == "" else str(int(name))


def _write_broker_configs(apis, name: str, configs: dict[str, str], validate_only: bool):
    """In a cluster: checks the BROKER resource's new configs here (all of them against this
    broker's layers when it is the default or this broker, key by key for another broker),
    then returns the ZooKeeper write to await (None with ``validate_only``). Every broker
    the change concerns applies it when notified; this one at once."""
    name = _broker_id_or_default(name)
    if _is_this_broker(apis, name):
        apis.config_admin_manager.set_broker_configs(name, configs, validate_only=True)
    else:
        try:
            validate_configs(apis.config, name, configs)
        except ConfigError as e:
            raise broker_config_error(name, e) from None
    if validate_only:
        return None
    return apis.dynamic_configs.write(name, configs)


async def _incremental_broker_configs(apis, resource, validate_only: bool) -> None:
    """IncrementalAlterConfigs of a BROKER resource in a cluster: the operations apply to
    what ZooKeeper holds for it (Kafka's ZooKeeper mode reads the entity's node), then
    as :func:`_write_broker_configs`."""
    name = _broker_id_or_default(resource.resource_name)
    configs = await apis.dynamic_configs.read(name)
    effective = {k: v for k, v in apis.config.describe().items() if v is not None}
    write = _write_broker_configs(
        apis, name, _incremented(configs, effective, resource.configs), validate_only
    )
    if write is not None:
        await write


def handle_alter_configs(apis, request, connection):
    body = request.body
    responses = []
    pending: list = []
    for r in body.resources:
        error, message = ErrorCode.NONE, None
        try:
            _preprocess(r.configs, lambda c: True)
            configs = {c.name: c.value for c in r.configs}
            _ensure_allowed(
                apis, connection, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name
            )
            pending.append(
                (
                    len(responses),
                    _apply(apis, r.resource_type, r.resource_name, configs, body.validate_only),
                )
            )
        except KafkaError as e:
            error, message = e.errno, str(e)
        responses.append(
            AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=int(error),
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return _answer(
        AlterConfigsResponse(throttle_time_ms=0, responses=responses), responses, pending
    )


def _preprocess(entries, needs_value) -> None:
    """Kafka's ConfigAdminManager.preprocess: INVALID_REQUEST for a key given twice, or a
    null value where ``needs_value(entry)`` (every AlterConfigs entry; an
    IncrementalAlterConfigs operation other than DELETE)."""
    names = [c.name for c in entries]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [c.name for c in entries if c.value is None and needs_value(c)]
    if nulls:
        raise InvalidRequestError("Null value not supported for : " + ", ".join(nulls))


def _answer(response, responses, pending):
    """The response, once the ZooKeeper writes among ``pending`` (index, awaitable or
    None) are done; a write that fails fails its resource."""
    writes = [(i, w) for i, w in pending if w is not None]
    if not writes:
        return response

    async def wait():
        for i, write in writes:
            try:
                await write
            except KafkaError as e:
                responses[i].error_code, responses[i].error_message = int(e.errno), str(e)
        return response

    return wait()


def _current(apis, resource_type: int, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(the resource's own configs, its effective values) for IncrementalAlterConfigs."""
    if resource_type == TOPIC:
        topic = apis.metadata_cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return dict(topic.configs), apis.log_config_manager.effective_config(topic)
    if resource_type == BROKER:
        if not _is_this_broker(apis, name):
            raise InvalidRequestError(
                f"broker {name!r} is not this broker ({apis.broker_id}) or the default ('')"
            )
        return apis.dynamic_configs.get(name), {
            k: v for k, v in apis.config.describe().items() if v is not None
        }
    return {}, {}


def client_metrics_entries(apis, name: str, keys, include_synonyms: bool = False) -> list:
    """A CLIENT_METRICS resource's keys as Kafka describes them: those it holds, each with
    source CLIENT_METRICS_CONFIG (none for a resource that does not exist)."""
    if not name:
        raise InvalidRequestError("Client metrics subscription name must not be empty")
    return [
        _entry(
            key,
            value,
            SOURCE_CLIENT_METRICS,
            config_type=TYPE_LIST if key in client_metrics_configs.LIST_KEYS else TYPE_INT,
        )
        for key, value in sorted(apis.client_telemetry.describe(name).items())
        if keys is None or key in keys
    ]


def group_entries(apis, name: str, keys, include_synonyms: bool) -> list:
    """A GROUP resource's keys as Kafka 4 describes them: every one, in force for the group
    (source GROUP_CONFIG where the group sets it, else DEFAULT_CONFIG), a synonym each."""
    out = []
    for key, value, own in apis.group_configs.describe(name):
        if keys is not None and key not in keys:
            continue
        source = SOURCE_GROUP if own else SOURCE_DEFAULT
        synonym = DescribeConfigsResponse.DescribeConfigsSynonym(
            name=key, value=value, source=source
        )
        config_type = TYPE_INT if group_config.is_int(key) else TYPE_STRING
        out.append(
            _entry(
                key,
                value,
                source,
                synonyms=[synonym] if include_synonyms else (),
                config_type=config_type,
            )
        )
    return out


def client_metrics_incremented(
    configs: dict[str, str], operations, list_keys=client_metrics_configs.LIST_KEYS
) -> dict[str, str]:
    """A CLIENT_METRICS (or GROUP, whose ``list_keys`` are none) resource's configs after
    IncrementalAlterConfigs' operations; APPEND and SUBTRACT take its LIST keys
    (``metrics``, ``match``) alone (Kafka's controller's text otherwise)."""
    for c in operations:
        if c.config_operation == OP_SET:
            if c.value is None:
                raise InvalidConfigError(f"null value for {c.name}")
            configs[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            configs.pop(c.name, None)
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            if c.name not in list_keys:
                op = "APPEND" if c.config_operation == OP_APPEND else "SUBTRACT"
                raise InvalidConfigError(
                    f"Can't {op} to key {c.name} because its type is not LIST."
                )
            current = client_metrics_configs.split_list(configs.get(c.name, ""))
            items = client_metrics_configs.split_list(c.value or "")
            configs[c.name] = _list_changed(current, items, c.config_operation)
        else:
            raise InvalidRequestError(f"unknown config operation {c.config_operation}")
    return configs


def _list_changed(current: list[str], items: list[str], operation: int) -> str:
    """A LIST config's value after APPEND (items not yet in it, at the end) or SUBTRACT
    (every item removed), comma-separated."""
    if operation == OP_APPEND:
        return ",".join(current + [v for v in items if v not in current])
    return ",".join(v for v in current if v not in items)


def _incremented(configs: dict[str, str], effective: dict[str, str], operations) -> dict[str, str]:
    """``configs`` (a resource's own) after IncrementalAlterConfigs' SET, DELETE, APPEND
    and SUBTRACT; a list's current value is its own, else the effective one."""
    for c in operations:
        if c.config_operation == OP_SET:
            configs[c.name] = c.value  # not null: refused before (_preprocess)
        elif c.config_operation == OP_DELETE:
            configs.pop(c.name, None)
        elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
            if _type_of(c.name, None) != TYPE_LIST:
                op = "append" if c.config_operation == OP_APPEND else "subtract"
                raise InvalidConfigError(
                    f"Config value {op} is not allowed for config key: {c.name}"
                )
            current = [v for v in configs.get(c.name, effective.get(c.name, "")).split(",") if v]
            items = [v for v in (c.value or "").split(",") if v]
            configs[c.name] = _list_changed(current, items, c.config_operation)
        else:
            raise InvalidRequestError(f"unknown config operation {c.config_operation}")
    return configs


def _alter_loggers(apis, resource, validate_only: bool) -> None:
    """SET or DELETE log levels; every change is checked before any is made (Kafka's
    RuntimeLoggerManager, its texts; its "Unexpected node id" names this broker twice)."""
    name = resource.resource_name
    try:
        node_id = _broker_id_of(name)
    except InvalidRequestError:
        raise InvalidRequestError(f"Node id must be an integer, but it is: {name}") from None
    if node_id != apis.broker_id:
        raise InvalidRequestError(
            f"Unexpected node id. Expected {apis.broker_id}, but received {apis.broker_id}"
        )
    for final in (False, True):
        for c in resource.configs:
            if c.config_operation not in (OP_SET, OP_DELETE):
                op = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}.get(c.config_operation)
                raise InvalidRequestError(
                    f"{op} operation is not allowed for the BROKER_LOGGER resource"
                    if op
                    else f"Unknown operation type {c.config_operation} is not allowed for "
                    "the BROKER_LOGGER resource"
                )
            broker_loggers.set_level(
                c.name,
                c.value if c.config_operation == OP_SET else None,
                validate_only=not final or validate_only,
            )


def handle_incremental_alter_configs(apis, request, connection):
    body = request.body
    responses = []
    pending: list = []
    for r in body.resources:
        error, message = ErrorCode.NONE, None
        try:
            _preprocess(r.configs, lambda c: c.config_operation != OP_DELETE)
            _ensure_allowed(
                apis, connection, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name
            )
            if r.resource_type == BROKER_LOGGER:
                _alter_loggers(apis, r, body.validate_only)
                responses.append(
                    IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                        error_code=0,
                        error_message=None,
                        resource_type=r.resource_type,
                        resource_name=r.resource_name,
                    )
                )
                continue
            if r.resource_type in (CLIENT_METRICS, GROUP):
                owner = apis.client_telemetry if r.resource_type == CLIENT_METRICS else None
                list_keys = client_metrics_configs.LIST_KEYS if owner else frozenset()
                pending.append(
                    (
                        len(responses),
                        (owner or apis.group_configs).alter(
                            r.resource_name,
                            lambda current, ops=r.configs, lk=list_keys: client_metrics_incremented(
                                current, ops, lk
                            ),
                            body.validate_only,
                        ),
                    )
                )
            elif r.resource_type == BROKER and apis.zk_support is not None:
                pending.append(
                    (len(responses), _incremental_broker_configs(apis, r, body.validate_only))
                )
            else:
                configs, effective = _current(apis, r.resource_type, r.resource_name)
                configs = _incremented(configs, effective, r.configs)
                pending.append(
                    (
                        len(responses),
                        _apply(apis, r.resource_type, r.resource_name, configs, body.validate_only),
                    )
                )
        except KafkaError as e:
            error, message = e.errno, str(e)
        responses.append(
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=int(error),
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
        )
    return _answer(
        IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses), responses, pending
    )


HANDLERS = {
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
}
