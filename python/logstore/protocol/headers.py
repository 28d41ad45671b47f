"""Request and response headers.

Request header (follows the int32 size prefix of every request frame):

=========  ================  =============================================
version    field             format
=========  ================  =============================================
0, 1, 2    api_key           int16
0, 1, 2    api_version       int16
0, 1, 2    correlation_id    int32
1, 2       client_id         nullable string, int16 length, *never* compact
2          tagged fields     tagged-field section
=========  ================  =============================================

v2 is used for flexible request versions, v1 otherwise; v0, without
client_id, only by ControlledShutdown v0 (``ApiKey.request_header_version``).
The client_id keeps the int16 length even in v2 so that any broker can read
the header of an ApiVersions request whose version it does not know.

Response header: ``correlation_id`` int32 (v0), plus a tagged-field
section (v1, flexible versions, except ApiVersions which always uses v0).
"""

from __future__ import annotations

import dataclasses

from logstore.protocol.types import STRING, Reader, Writer

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "read_request_header",
    "read_response_header",
    "write_request_header",
    "write_response_header",
]


@dataclasses.dataclass(slots=True, kw_only=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    unknown_tagged_fields: dict[int, bytes] = dataclasses.field(default_factory=dict, repr=False)


@dataclasses.dataclass(slots=True, kw_only=True)
class ResponseHeader:
    correlation_id: int
    unknown_tagged_fields: dict[int, bytes] = dataclasses.field(default_factory=dict, repr=False)


def read_client_id(r: Reader) -> str | None:
    n = r.string_length(False)
    return None if n < 0 else r.text(n)


def _read_tags(r: Reader) -> dict[int, bytes]:
    # No tagged header fields are defined; keep whatever arrives.
    return {tag: bytes(sub.buf[sub.pos : sub.end]) for tag, sub in r.tagged_fields()}


def _write_tags(w: Writer, tags: dict[int, bytes]) -> None:
    w.unsigned_varint(len(tags))
    for tag in sorted(tags):
        data = tags[tag]
        w.unsigned_varint(tag)
        w.unsigned_varint(len(data))
        w.raw(data)


def read_request_header(r: Reader, header_version: int) -> RequestHeader:
    """Read a v0, v1 or v2 request header."""
    header = RequestHeader(api_key=r.int16(), api_version=r.int16(), correlation_id=r.int32())
    if header_version >= 1:
        header.client_id = read_client_id(r)
    if header_version >= 2:
        header.unknown_tagged_fields = _read_tags(r)
    return header


def write_request_header(w: Writer, header: RequestHeader, header_version: int) -> None:
    w.int16(header.api_key)
    w.int16(header.api_version)
    w.int32(header.correlation_id)
    if header_version >= 1:
        STRING.writer(False, True)(w, header.client_id)
    if header_version >= 2:
        _write_tags(w, header.unknown_tagged_fields)


def read_response_header(r: Reader, header_version: int) -> ResponseHeader:
    header = ResponseHeader(correlation_id=r.int32())
    if header_version >= 1:
        header.unknown_tagged_fields = _read_tags(r)
    return header


def write_response_header(w: Writer, header: ResponseHeader, header_version: int) -> None:
    w.int32(header.correlation_id)
    if header_version >= 1:
        _write_tags(w, header.unknown_tagged_fields)
