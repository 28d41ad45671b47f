"""ApiVersions: the version ranges of every API this broker serves.

The response always goes out with the v0 response header (the codec does that), and
an unsupported ApiVersions version gets this v0 body with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.messages.api_versions import ApiVersionsResponse


# Advertised minimums below what is served. librdkafka before 2.11 compresses with
# gzip, snappy or lz4 only when the Produce range includes v0 (librdkafka#4956); as
# Kafka does since KAFKA-18659, Produce is advertised from v0 while v0-2 requests are
# still refused (no client picks them: each uses the highest version both support).
ADVERTISED_MIN_VERSION = {ApiKey.PRODUCE: 0}


def api_versions_body(error: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    from broker_py.server.handlers import served_api_keys

    return ApiVersionsResponse(
        error_code=int(error),
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=int(k), min_version=ADVERTISED_MIN_VERSION.get(k, k.min_version), max_version=k.max_version
            )
            for k in served_api_keys()
        ],
    )


def handle_api_versions(apis, request, connection):
    body = request.body
    if request.api_version >= 3:
        connection.client_software = f"{body.client_software_name}/{body.client_software_version}"
    return api_versions_body()


HANDLERS = {ApiKey.API_VERSIONS: handle_api_versions}
