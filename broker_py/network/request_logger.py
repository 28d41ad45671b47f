"""The request log: one line per completed request with where its time went, written to
the ``kafka.request.logger`` logger at DEBUG, in the shape of Kafka's request log.

Off by default (the logger is at INFO); a client turns it on at runtime through the
BROKER_LOGGER resource (``kafka-configs.sh --entity-type broker-loggers --alter
--add-config kafka.request.logger=DEBUG``). While it is off the network layer takes one
clock reading per socket read and nothing per request.

The phases of a request, in milliseconds, as Kafka names them:

- ``requestQueueTime``: from the read that completed the frame to the handler's start
  (the request waited behind earlier requests of the same connection);
- ``localTime``: the handler's own work on the event loop;
- ``remoteTime``: waiting for something else (a long-polling Fetch, a JoinGroup
  waiting for the rebalance);
- ``responseQueueTime``: from the response being ready to its encoding;
- ``sendTime``: encoding the response and handing it to the socket (for a Fetch,
  until the last ``sendfile`` returned);
- ``totalTime``: from the read to the end of the send.

The clock starts when the event loop delivered the bytes, so time a request spent in
the kernel's socket buffer while the loop was busy elsewhere is not in ``totalTime``.
"""

from __future__ import annotations

import logging
import time

LOGGER_NAME = "kafka.request.logger"
request_log = logging.getLogger(LOGGER_NAME)

now = time.perf_counter


class RequestTimes:
    """Clock readings (``time.perf_counter()`` seconds) of one request's phases."""

    __slots__ = ("received", "started", "local_done", "remote_done", "send_started", "sent")

    def __init__(self, received: float, started: float) -> None:
        self.received = received
        self.started = started
        self.local_done = started
        self.remote_done = started
        self.send_started = started
        self.sent = started

    def phases_ms(self) -> dict[str, float]:
        ms = 1000.0
        return {
            "totalTime": (self.sent - self.received) * ms,
            "requestQueueTime": (self.started - self.received) * ms,
            "localTime": (self.local_done - self.started) * ms,
            "remoteTime": (self.remote_done - self.local_done) * ms,
            "throttleTime": 0.0,
            "responseQueueTime": (self.send_started - self.remote_done) * ms,
            "sendTime": (self.sent - self.send_started) * ms,
        }


def enabled() -> bool:
    return request_log.isEnabledFor(logging.DEBUG)


def log_completed(
    api_name: str,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    local: str,
    peer: str,
    times: RequestTimes,
    principal: str = "User:ANONYMOUS",
) -> None:
    """``Completed request:...;totalTime:...`` as Kafka's RequestChannel logs it."""
    phases = ",".join(f"{k}:{v:.3f}" for k, v in times.phases_ms().items())
    request_log.debug(
        "Completed request:{apiKey:%s,apiVersion:%d,correlationId:%d,clientId:%s} "
        "from connection %s-%s;%s,principal:%s",
        api_name,
        api_version,
        correlation_id,
        client_id,
        local,
        peer,
        phases,
        principal,
    )
