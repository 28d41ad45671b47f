"""What a handler knows of the client behind a request (Kafka's ``RequestContext``).

The network layer's connection object is passed to every handler as its request
context; handlers and the authorizer read only what this protocol names, so a test
may pass any object that has it (or ``None``: a request made inside the broker, which
every authorization check lets through).
"""

from __future__ import annotations

from typing import Any, Protocol


class RequestContext(Protocol):
    # The authenticated principal, as ACLs name it (``User:ANONYMOUS`` without SASL or a
    # client certificate).
    @property
    def principal(self) -> str: ...

    host: str  # the client's address, as ACLs name hosts
    peer: str  # host:port of the client, for logs and member ids
    client_id: str | None  # the client id of the latest request
    client_software: str | None  # name/version from ApiVersions v3+
    server: Any  # the listener the request came in on (its ``name`` picks the advertised address)
    sasl: Any  # the connection's SASL authenticator, on a SASL listener

    def close_after_response(self) -> None:
        """Closes the connection once the response to this request is sent."""
