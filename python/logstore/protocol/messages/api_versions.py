"""ApiVersions (18): which api keys and versions the broker serves.

v3+ requests carry the client's software name and version (KIP-511).
Quirks the broker must keep:

* The response always uses response header v0, whatever the version
  (``ApiKey.response_header_version``).
* An error response is written in the v0 body: for a version we do not
  serve, Kafka answers v0 with error 35 (UNSUPPORTED_VERSION) and still
  lists its ranges so the client can retry lower; kafka-python reads any
  error response as v0.  ``frame.encode_response`` applies this rule.
* v3+ features (``supported_features`` etc.) are tagged fields.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.schema import Array, Field, Message, Struct, StructValue, message
from logstore.protocol.types import BOOL, INT16, INT32, INT64, STRING

__all__ = [
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "advertised_api_versions",
    "api_versions_response",
]

ApiVersionsRequest = message(
    ApiKey.API_VERSIONS,
    "request",
    [
        Field("client_software_name", STRING, "3+"),
        Field("client_software_version", STRING, "3+"),
    ],
)

ApiVersionsResponse = message(
    ApiKey.API_VERSIONS,
    "response",
    [
        Field("error_code", INT16, "0+"),
        Field(
            "api_keys",
            Array(
                Struct(
                    "ApiVersion",
                    [
                        Field("api_key", INT16, "0+"),
                        Field("min_version", INT16, "0+"),
                        Field("max_version", INT16, "0+"),
                    ],
                )
            ),
            "0+",
        ),
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "supported_features",
            Array(
                Struct(
                    "SupportedFeatureKey",
                    [
                        Field("name", STRING, "3+"),
                        Field("min_version", INT16, "3+"),
                        Field("max_version", INT16, "3+"),
                    ],
                )
            ),
            "3+",
            tag=0,
        ),
        Field("finalized_features_epoch", INT64, "3+", default=-1, tag=1),
        Field(
            "finalized_features",
            Array(
                Struct(
                    "FinalizedFeatureKey",
                    [
                        Field("name", STRING, "3+"),
                        Field("max_version_level", INT16, "3+"),
                        Field("min_version_level", INT16, "3+"),
                    ],
                )
            ),
            "3+",
            tag=2,
        ),
        Field("zk_migration_ready", BOOL, "3+", tag=3),
    ],
)


def advertised_api_versions() -> list[StructValue]:
    """One entry per api key we serve, with the ranges of :class:`ApiKey`."""
    return [
        ApiVersionsResponse.ApiVersion(
            api_key=int(key), min_version=key.min_version, max_version=key.max_version
        )
        for key in ApiKey
    ]


def api_versions_response(error_code: int = 0, throttle_time_ms: int = 0) -> Message:
    """The broker's ApiVersions answer, listing every advertised range.

    With ``error_code`` 35 (UNSUPPORTED_VERSION) this is the answer to an
    ApiVersions request at a version we do not serve; encode it at v0.
    """
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=advertised_api_versions(),
        throttle_time_ms=throttle_time_ms,
    )
