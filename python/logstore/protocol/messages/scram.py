"""SCRAM credential admin: DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51), KIP-554. Every version is flexible.

``mechanism`` is Kafka's ScramMechanism id: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512 (0 unknown).
An upsertion carries the salt and the salted password the client derived
(``Hi(password, salt, iterations)``), never the password.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Struct, message
from logstore.protocol.types import BYTES, INT8, INT16, INT32, STRING

__all__ = [
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
]

DescribeUserScramCredentialsRequest = message(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "request",
    [
        Field(
            "users",
            Array(
                Struct(
                    "UserName",
                    [
                        Field("name", STRING, "0+"),
                    ],
                )
            ),
            "0+",
            nullable="0+",
            default=None,
        ),
    ],
)

DescribeUserScramCredentialsResponse = message(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable="0+", default=None),
        Field(
            "results",
            Array(
                Struct(
                    "DescribeUserScramCredentialsResult",
                    [
                        Field("user", STRING, "0+"),
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                        Field(
                            "credential_infos",
                            Array(
                                Struct(
                                    "CredentialInfo",
                                    [
                                        Field("mechanism", INT8, "0+"),
                                        Field("iterations", INT32, "0+"),
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
    ],
)

AlterUserScramCredentialsRequest = message(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "request",
    [
        Field(
            "deletions",
            Array(
                Struct(
                    "ScramCredentialDeletion",
                    [
                        Field("name", STRING, "0+"),
                        Field("mechanism", INT8, "0+"),
                    ],
                )
            ),
            "0+",
        ),
        Field(
            "upsertions",
            Array(
                Struct(
                    "ScramCredentialUpsertion",
                    [
                        Field("name", STRING, "0+"),
                        Field("mechanism", INT8, "0+"),
                        Field("iterations", INT32, "0+"),
                        Field("salt", BYTES, "0+"),
                        Field("salted_password", BYTES, "0+"),
                    ],
                )
            ),
            "0+",
        ),
    ],
)

AlterUserScramCredentialsResponse = message(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "response",
    [
        Field("throttle_time_ms", INT32, "0+"),
        Field(
            "results",
            Array(
                Struct(
                    "AlterUserScramCredentialsResult",
                    [
                        Field("user", STRING, "0+"),
                        Field("error_code", INT16, "0+"),
                        Field("error_message", STRING, "0+", nullable="0+", default=None),
                    ],
                )
            ),
            "0+",
        ),
    ],
)
