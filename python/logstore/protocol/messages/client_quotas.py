"""Client quota admin: DescribeClientQuotas (48) and AlterClientQuotas (49), KIP-546.

Versions 0-1, v1 flexible. An entity is a list of (entity type, entity name) pairs; the
types are ``user``, ``client-id`` and ``ip``, and a null name is the type's default
entity. A describe filter component's ``match_type`` is 0 (exact ``match``), 1 (the
default entity, ``match`` null) or 2 (any named entity, ``match`` null); ``strict``
leaves out entities with types the filter does not name. A quota value is a float64
(``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``, ``connection_creation_rate``).
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BOOL, FLOAT64, INT8, INT16, INT32, STRING

__all__ = [
    "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
    "DescribeClientQuotasRequest",
    "DescribeClientQuotasResponse",
]

MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


def _entity() -> Array:
    return Array(
        Struct(
            "EntityData",
            [
                Field("entity_type", STRING, "0+"),
                Field("entity_name", STRING, "0+", nullable="0+", default=None),
            ],
        )
    )


DescribeClientQuotasRequest = message(
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    "request",
    [
        Field(
            "components",
            Array(
                Struct(
                    "ComponentData",
                    [
                        Field("entity_type", STRING, "0+"),
                        Field("match_type", INT8, "0+"),
                        Field("match", STRING, "0+", nullable="0+", default=None),
                    ],
                )
            ),
            "0+",
        ),
        Field("strict", BOOL, "0+"),
    ],
)

DescribeClientQuotasResponse = message(
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
        Field(
            "entries",
            Array(
                Struct(
                    "EntryData",
                    [
                        Field("entity", _entity(), "0+"),
                        Field(
                            "values",
                            Array(
                                Struct(
                                    "ValueData",
                                    [
                                        Field("key", STRING, "0+"),
                                        Field("value", FLOAT64, "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                    ],
                )
            ),
            "0+",
            nullable="0+",
            default=None,
        ),
    ],
)

AlterClientQuotasRequest = message(
    ApiKey.ALTER_CLIENT_QUOTAS,
    "request",
    [
        Field(
            "entries",
            Array(
                Struct(
                    "EntryData",
                    [
                        Field("entity", _entity(), "0+"),
                        Field(
                            "ops",
                            Array(
                                Struct(
                                    "OpData",
                                    [
                                        Field("key", STRING, "0+"),
                                        Field("value", FLOAT64, "0+"),
                                        Field("remove", BOOL, "0+"),
                                    ],
                                )
                            ),
                            "0+",
                        ),
                    ],
                )
            ),
            "0+",
        ),
        Field("validate_only", BOOL, "0+"),
    ],
)

AlterClientQuotasResponse = message(
    ApiKey.ALTER_CLIENT_QUOTAS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "entries",
            Array(
                Struct(
                    "EntryData",
                    [
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                        Field("entity", _entity(), "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
