"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and the broker.

Topic configs are described with every effective key, each with its source: a topic
override (TOPIC_CONFIG), a key set in server.properties (STATIC_BROKER_CONFIG) or
Kafka's default (DEFAULT_CONFIG), and with the chain of synonyms when asked. Broker
configs are static: they are described, and altering them is refused.
"""

from __future__ import annotations

from broker_py.config import BrokerConfig
from broker_py.error_codes import ErrorCode
from broker_py.errors import InvalidConfigError, InvalidRequestError, KafkaError, UnknownTopicOrPartitionError
from broker_py.protocol.api_keys import ApiKey
from broker_py.protocol.messages.configs import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3

_LIST_KEYS = {"cleanup.policy", "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"}
_TYPES = {
    "cleanup.policy": TYPE_LIST,
    "compression.type": TYPE_STRING,
    "message.timestamp.type": TYPE_STRING,
    "min.cleanable.dirty.ratio": TYPE_DOUBLE,
    "min.insync.replicas": TYPE_INT,
    "index.interval.bytes": TYPE_INT,
    "segment.bytes": TYPE_INT,
    "segment.index.bytes": TYPE_INT,
    "max.message.bytes": TYPE_INT,
    "unclean.leader.election.enable": TYPE_BOOLEAN,
    "preallocate": TYPE_BOOLEAN,
    "message.downconversion.enable": TYPE_BOOLEAN,
    "remote.storage.enable": TYPE_BOOLEAN,
}


def _type_of(key: str, value: str | None) -> int:
    if key in _TYPES:
        return _TYPES[key]
    if key in _LIST_KEYS:
        return TYPE_LIST
    if key.endswith((".ms", ".bytes", ".messages")):
        return TYPE_LONG
    return TYPE_STRING


def _topic_entries(broker, topic, keys, include_synonyms):
    effective = broker.effective_config(topic)
    out = []
    for key in sorted(effective):
        if keys is not None and key not in keys:
            continue
        value = effective[key]
        synonyms = []
        broker_key = BrokerConfig.synonym_of(key)
        if key in topic.configs:
            source = SOURCE_TOPIC
            synonyms.append(DescribeConfigsResponse.DescribeConfigsSynonym(name=key, value=topic.configs[key], source=SOURCE_TOPIC))
        elif broker_key and broker.config.is_set(broker_key):
            source = SOURCE_STATIC_BROKER
        else:
            source = SOURCE_DEFAULT
        if broker_key and broker.config.is_set(broker_key):
            synonyms.append(DescribeConfigsResponse.DescribeConfigsSynonym(name=broker_key, value=broker.config.originals[broker_key], source=SOURCE_STATIC_BROKER))
        if broker_key:
            default = broker.config.describe().get(broker_key)
            synonyms.append(DescribeConfigsResponse.DescribeConfigsSynonym(name=broker_key, value=default, source=SOURCE_DEFAULT))
        out.append(
            DescribeConfigsResponse.DescribeConfigsResourceResult(
                name=key,
                value=value,
                read_only=False,
                config_source=source,
                is_sensitive=False,
                synonyms=synonyms if include_synonyms else [],
                config_type=_type_of(key, value),
                documentation=None,
            )
        )
    return out


def _broker_entries(broker, keys, include_synonyms):
    out = []
    for key, value in sorted(broker.config.describe().items()):
        if keys is not None and key not in keys:
            continue
        source = SOURCE_STATIC_BROKER if broker.config.is_set(key) else SOURCE_DEFAULT
        synonyms = [DescribeConfigsResponse.DescribeConfigsSynonym(name=key, value=value, source=source)] if include_synonyms else []
        out.append(
            DescribeConfigsResponse.DescribeConfigsResourceResult(
                name=key,
                value=value,
                read_only=True,
                config_source=source,
                is_sensitive=False,
                synonyms=synonyms,
                config_type=_type_of(key, value),
                documentation=None,
            )
        )
    return out


def _is_this_broker(broker, name: str) -> bool:
    return name in ("", str(broker.broker_id))


def handle_describe_configs(broker, request, connection):
    body = request.body
    results = []
    for r in body.resources:
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        result = DescribeConfigsResponse.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=r.resource_type, resource_name=r.resource_name, configs=[]
        )
        if r.resource_type == TOPIC:
            topic = broker.metadata.get(r.resource_name)
            if topic is None:
                result.error_code = int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                result.error_message = f"topic {r.resource_name!r} does not exist"
            else:
                result.configs = _topic_entries(broker, topic, keys, body.include_synonyms)
        elif r.resource_type == BROKER and _is_this_broker(broker, r.resource_name):
            result.configs = _broker_entries(broker, keys, body.include_synonyms)
        elif r.resource_type == BROKER_LOGGER and _is_this_broker(broker, r.resource_name):
            result.configs = []
        else:
            result.error_code = int(ErrorCode.INVALID_REQUEST)
            result.error_message = f"unknown resource type {r.resource_type} or broker {r.resource_name!r}"
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _apply(broker, resource_type: int, name: str, new_configs, validate_only: bool) -> None:
    if resource_type == TOPIC:
        if broker.metadata.get(name) is None:
            raise UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        broker.set_topic_configs(name, new_configs, validate_only=validate_only)
    elif resource_type in (BROKER, BROKER_LOGGER):
        raise InvalidRequestError("broker configs are static (server.properties); they cannot be altered at runtime")
    else:
        raise InvalidRequestError(f"unknown resource type {resource_type}")


def handle_alter_configs(broker, request, connection):
    body = request.body
    responses = []
    for r in body.resources:
        error, message = ErrorCode.NONE, None
        try:
            configs = {}
            for c in r.configs:
                if c.value is None:
                    raise InvalidConfigError(f"null value for {c.name}")
                configs[c.name] = c.value
            _apply(broker, r.resource_type, r.resource_name, configs, body.validate_only)
        except KafkaError as e:
            error, message = e.errno, str(e)
        responses.append(
            AlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=int(error), error_message=message, resource_type=r.resource_type, resource_name=r.resource_name
            )
        )
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def handle_incremental_alter_configs(broker, request, connection):
    body = request.body
    responses = []
    for r in body.resources:
        error, message = ErrorCode.NONE, None
        try:
            if r.resource_type == TOPIC:
                topic = broker.metadata.get(r.resource_name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"topic {r.resource_name!r} does not exist")
                configs = dict(topic.configs)
                effective = broker.effective_config(topic)
                for c in r.configs:
                    if c.config_operation == OP_SET:
                        if c.value is None:
                            raise InvalidConfigError(f"null value for {c.name}")
                        configs[c.name] = c.value
                    elif c.config_operation == OP_DELETE:
                        configs.pop(c.name, None)
                    elif c.config_operation in (OP_APPEND, OP_SUBTRACT):
                        if _type_of(c.name, None) != TYPE_LIST:
                            raise InvalidConfigError(f"{c.name} is not a list config")
                        current = [v for v in configs.get(c.name, effective.get(c.name, "")).split(",") if v]
                        items = [v for v in (c.value or "").split(",") if v]
                        if c.config_operation == OP_APPEND:
                            current += [v for v in items if v not in current]
                        else:
                            current = [v for v in current if v not in items]
                        configs[c.name] = ",".join(current)
                    else:
                        raise InvalidRequestError(f"unknown config operation {c.config_operation}")
                _apply(broker, TOPIC, r.resource_name, configs, body.validate_only)
            else:
                _apply(broker, r.resource_type, r.resource_name, {}, body.validate_only)
        except KafkaError as e:
            error, message = e.errno, str(e)
        responses.append(
            IncrementalAlterConfigsResponse.AlterConfigsResourceResponse(
                error_code=int(error), error_message=message, resource_type=r.resource_type, resource_name=r.resource_name
            )
        )
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


HANDLERS = {
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
}
