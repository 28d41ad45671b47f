"""The answer to a request whose handler failed (Kafka's ``getErrorResponse``): the
request's response, at its version, with the error in every error field, so the
client sees UNKNOWN_SERVER_ERROR (or the given code) for that request and keeps its
connection, as Kafka does.

The response mirrors the request: each array of structs in the response is filled
from the request's array at the same position, carrying the entries' keys (topic
name or id, partition index, group or transactional id, ...) and the error; a request
array of plain keys (``partition_indexes``) becomes one response entry per key. Every
``error_code`` field gets the code and every ``error_message`` field its description.
"""

from __future__ import annotations

from typing import Any

import logstore
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.messages import response_class
from logstore.protocol.produce_frame import ProduceFrame
from logstore.protocol.schema import Array, Struct

# A response field's name -> the request field names that carry its value, in order.
_KEYS: dict[str, tuple[str, ...]] = {
    "name": ("name", "topic", "topic_name"),
    "topic": ("topic", "name", "topic_name"),
    "topic_name": ("topic_name", "name", "topic"),
    "topic_id": ("topic_id",),
    "index": ("index", "partition_index", "partition"),
    "partition_index": ("partition_index", "index", "partition", "partition_id"),
    "partition": ("partition", "partition_index", "index"),
    "partition_id": ("partition_id", "partition_index", "partition"),
    "group_id": ("group_id",),
    "transactional_id": ("transactional_id",),
    "producer_id": ("producer_id",),
    "resource_type": ("resource_type",),
    "resource_name": ("resource_name",),
    "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
    "log_dir": ("path", "log_dir"),
    "path": ("path",),
}


def _struct_arrays(struct_value: Any, version: int) -> list[tuple[Any, Any]]:
    """(field, value) of each array field present at ``version`` in a request struct."""
    if struct_value is None:
        return []
    out = []
    for f in struct_value.SCHEMA.fields:
        if isinstance(f.type, Array) and version in f.versions:
            out.append((f, getattr(struct_value, f.name)))
    return out


def _mirror(
    request_value: Any, struct: Struct, version: int, code: ErrorCode, key: Any = None
) -> Any:
    values: dict[str, Any] = {}
    request_arrays = (
        _struct_arrays(request_value, version) if hasattr(request_value, "SCHEMA") else []
    )
    next_array = 0
    keyed = False
    for f in struct.fields:
        if version not in f.versions:
            continue
        if f.name == "error_code":
            values[f.name] = int(code)
        elif f.name == "error_message":
            values[f.name] = code.description
        elif isinstance(f.type, Array) and isinstance(f.type.element, Struct):
            entries: list[Any] = []
            if next_array < len(request_arrays):
                rf, items = request_arrays[next_array]
                next_array += 1
                for item in items or []:
                    if isinstance(rf.type.element, Struct):
                        entries.append(_mirror(item, f.type.element, version, code))
                    else:
                        entries.append(_mirror(None, f.type.element, version, code, key=item))
            values[f.name] = entries
        elif f.name in _KEYS and not isinstance(f.type, (Array, Struct)):
            if request_value is not None and hasattr(request_value, "SCHEMA"):
                for candidate in _KEYS[f.name]:
                    if hasattr(request_value, candidate) and _fits(
                        f, version, getattr(request_value, candidate)
                    ):
                        values[f.name] = getattr(request_value, candidate)
                        break
            elif key is not None and not keyed and _fits(f, version, key):
                values[f.name] = key
                keyed = True
    return struct.cls(**values)


def _fits(f, version: int, value: Any) -> bool:
    """Whether ``value`` can go in primitive field ``f`` at ``version``."""
    if value is None:
        return version in f.nullable
    default = f.type.default
    if isinstance(default, bool) or isinstance(value, bool):
        return type(value) is type(default)
    return isinstance(value, type(default)) if default is not None else True


def error_response(request, code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR):
    """The response to ``request`` (a decoded Request or a ProduceFrame) carrying
    ``code`` everywhere; None when no response is sent (Produce with acks=0)."""
    if type(request) is ProduceFrame:
        if request.acks == 0:
            return None
        results = [
            (
                name,
                [(index, int(code), -1, -1, -1, code.description, ()) for index, *_ in partitions],
            )
            for name, partitions in request.topics
        ]
        return logstore.encode_produce_response(
            request.correlation_id, request.api_version, results
        )
    body = request.body
    if request.api_key == ApiKey.PRODUCE and body.acks == 0:
        return None
    cls = response_class(request.api_key)
    return _mirror(body, cls.SCHEMA, request.api_version, code)
