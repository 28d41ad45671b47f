"""FindCoordinator (10): the broker that coordinates a group or a transactional id.

``key_type`` (v1+) is 0 for a consumer group, 1 for a transactional id.  Up
to v3 one ``key`` and one answer; from v4 a batch of ``coordinator_keys``
with one ``coordinators`` entry each.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import INT8, INT16, INT32, STRING

__all__ = ["FindCoordinatorRequest", "FindCoordinatorResponse"]

FindCoordinatorRequest = message(
    ApiKey.FIND_COORDINATOR,
    "request",
    [
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+"),
        Field("coordinator_keys", Array(STRING), "4+"),
    ],
)

FindCoordinatorResponse = message(
    ApiKey.FIND_COORDINATOR,
    "response",
    [
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", nullable="1-3"),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field(
            "coordinators",
            Array(
                Struct(
                    "Coordinator",
                    [
                        Field("key", STRING, "4+"),
                        Field("node_id", INT32, "4+"),
                        Field("host", STRING, "4+"),
                        Field("port", INT32, "4+"),
                        Field("error_code", INT16, "4+"),
                        Field("error_message", STRING, "4+", nullable="4+"),
                    ],
                )
            ),
            "4+",
        ),
    ],
)
