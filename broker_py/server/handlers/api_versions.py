"""ApiVersions: the version ranges of every API this broker serves.

The ranges are Kafka 3.9's (``logstore.protocol.api_keys``), each served whole: every
advertised version is decoded and answered. The response always goes out with the v0
response header (the codec does that), and an unsupported ApiVersions version gets this
v0 body with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.frame import Request, UnsupportedRequest, encode_response
from logstore.protocol.headers import RequestHeader
from logstore.protocol.messages import request_class
from logstore.protocol.messages.api_versions import ApiVersionsResponse


def api_versions_body(
    error: ErrorCode = ErrorCode.NONE, unadvertised: frozenset[ApiKey] = frozenset()
) -> ApiVersionsResponse:
    from broker_py.server.handlers import served_api_keys

    return ApiVersionsResponse(
        error_code=int(error),
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=int(k), min_version=k.min_version, max_version=k.max_version
            )
            for k in served_api_keys()
            if k not in unadvertised
        ],
    )


def handle_api_versions(apis, request, connection):
    from broker_py.server.handlers.telemetry import unadvertised

    body = request.body
    if request.api_version >= 3:
        connection.client_software = f"{body.client_software_name}/{body.client_software_version}"
    return api_versions_body(unadvertised=unadvertised(apis))


HANDLERS = {ApiKey.API_VERSIONS: handle_api_versions}


def unsupported_version_answer(event: UnsupportedRequest) -> ApiVersionsResponse | bytes | None:
    """The answer to a request at a version this broker does not serve.

    ApiVersions gets the v0 body with UNSUPPORTED_VERSION and our ranges, so the
    client retries at a version we list (Kafka's rule). Any other api key we serve gets
    its error response with UNSUPPORTED_VERSION in every error field (mirroring the
    request's topics or groups when its body reads at our nearest version), written at
    that nearest version with the response header of the version asked: the client
    sees the error rather than a closed connection. An api key we do not know gets
    None (the connection is closed and the close logged), as from Kafka, which cannot
    parse such a request either.
    """
    if event.api_key == ApiKey.API_VERSIONS:
        return api_versions_body(ErrorCode.UNSUPPORTED_VERSION)
    from broker_py.server.error_response import error_response
    from broker_py.server.handlers import served_api_keys

    key = ApiKey.lookup(event.api_key)
    if key is None or key not in served_api_keys() or event.nearest_version is None:
        return None
    body = event.body
    if body is None:
        body = request_class(key)()
        if key is ApiKey.PRODUCE:
            body.acks = -1  # an acks=0 Produce gets no response; this one must
    header = RequestHeader(
        api_key=int(key),
        api_version=event.nearest_version,
        correlation_id=event.correlation_id,
        client_id=event.client_id,
    )
    response = error_response(Request(header, body, event.size), ErrorCode.UNSUPPORTED_VERSION)
    if response is None:  # acks=0
        return None
    return encode_response(event.correlation_id, key, event.nearest_version, response)
