"""A thin layer over confluent-kafka's AdminClient for the broker commands: every call
waits at most the command's ``--timeout`` and turns Kafka errors into words.

Errors: :func:`error_text` names a Kafka error code as Kafka does
(``TOPIC_ALREADY_EXISTS (36): Topic 'orders' already exists.``); librdkafka's own
errors (negative codes) keep their names without the leading underscore
(``TRANSPORT: ...``). A request that could not reach any broker is :class:`BrokerUnreachable`
(exit status 2), whose message names the cause librdkafka reported (a refused
connection, a host that does not resolve, a failed authentication, no answer within
``--timeout``: :mod:`logstore.cli.client_log`); a broker's refusal is
:class:`BrokerError` (exit status 1).

The client is polled after every call, so librdkafka's errors and log lines (``-v``)
reach the command's :class:`~logstore.cli.client_log.ClientLog` as they happen.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from logstore.cli.common import EXIT_FAILED, EXIT_USAGE, CliError
from logstore.cli.connection import ClientOptions, client_config_error
from logstore.cli.positions import Position, resolve

K = TypeVar("K")

# How long one wait lasts before the clients' reports are read again (seconds).
_SLICE = 0.5

# librdkafka errors that mean no broker answered at all.
_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
}


def error_text(err: KafkaError | BaseException) -> str:
    """``NAME (code): description`` for a Kafka error code; the exception text otherwise."""
    if isinstance(err, KafkaException) and err.args and isinstance(err.args[0], KafkaError):
        err = err.args[0]
    if not isinstance(err, KafkaError):
        return f"{type(err).__name__}: {err}"
    name = err.name().lstrip("_")
    code = err.code()
    detail = err.str()
    if detail.startswith("Broker: "):
        detail = detail[len("Broker: ") :]
    return f"{name} ({code}): {detail}" if code >= 0 else f"{name}: {detail}"


def kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):
        return exc
    return None


class BrokerError(CliError):
    """The broker refused the request; the message names the error code."""

    def __init__(self, what: str, err: KafkaError | BaseException) -> None:
        kerr = kafka_error(err) if isinstance(err, BaseException) else err
        unreachable = kerr is not None and kerr.code() in _UNREACHABLE
        super().__init__(f"{what}: {error_text(err)}", EXIT_USAGE if unreachable else EXIT_FAILED)
        self.kafka_error = kerr


class BrokerUnreachable(BrokerError):
    """No broker of ``--brokers`` answered within ``--timeout``; ``cause`` (from the
    clients' :class:`~logstore.cli.client_log.ClientLog`) is the message when given."""

    def __init__(self, what: str, err: KafkaError | BaseException, cause: str = "") -> None:
        super().__init__(what, err)
        self.exit_code = EXIT_USAGE
        if cause:
            self.args = (cause,)


class Admin:
    """One AdminClient for the command's duration."""

    def __init__(self, client: ClientOptions) -> None:
        self.options = client
        self.timeout = client.timeout
        try:
            self.client = AdminClient(client.config())
        except KafkaException as exc:
            raise client_config_error(exc) from None

    def kwargs(self) -> dict[str, float]:
        return {"request_timeout": self.timeout}

    def result(self, future: Future[Any], what: str) -> Any:
        """The future's value, or BrokerError naming ``what``."""
        try:
            value = self._wait(future, what)
        except KafkaException as exc:
            raise self._error(what, exc) from None
        except TimeoutError:
            raise self._unreachable(what, KafkaError(KafkaError._TIMED_OUT)) from None
        finally:
            self.client.poll(0)
        # ListConsumerGroups answers with an error per broker it could not ask.
        errors = getattr(value, "errors", None)
        if errors and not getattr(value, "valid", None):
            if all(isinstance(e, KafkaError) and e.code() in _UNREACHABLE for e in errors):
                raise self._unreachable(what, errors[0])
        return value

    def results(self, futures: Mapping[K, Future[Any]]) -> dict[K, Any]:
        """Each key's value or its exception (KafkaException), for per-item reports."""
        out: dict[K, Any] = {}
        try:
            for key, future in futures.items():
                try:
                    out[key] = self._wait(future, str(key))
                except KafkaException as exc:
                    kerr = kafka_error(exc)
                    if kerr is not None and kerr.code() in _UNREACHABLE:
                        raise self._unreachable(str(key), exc) from None
                    out[key] = exc
                except TimeoutError:
                    raise self._unreachable(str(key), KafkaError(KafkaError._TIMED_OUT)) from None
        finally:
            self.client.poll(0)
        return out

    def _error(self, what: str, exc: KafkaException) -> BrokerError:
        kerr = kafka_error(exc)
        if kerr is not None and kerr.code() in _UNREACHABLE:
            return self._unreachable(what, exc)
        return BrokerError(what, exc)

    def _unreachable(self, what: str, err: KafkaError | BaseException) -> BrokerUnreachable:
        """BrokerUnreachable naming the cause the client reported (it is polled first, so
        its errors and log lines have arrived)."""
        self.client.poll(0)
        return BrokerUnreachable(what, err, self.options.log.cause())

    def metadata(self, topic: str | None = None) -> Any:
        """ClusterMetadata of every topic (or one)."""
        deadline = time.monotonic() + self.timeout
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    return self.client.list_topics(topic=topic, timeout=max(min(_SLICE, left), 0.1))
                except KafkaException as exc:
                    kerr = kafka_error(exc)
                    retry = kerr is not None and kerr.code() in _UNREACHABLE and left > _SLICE
                    if not retry:
                        raise self._error("metadata", exc) from None
                self._stop_if_refused("metadata")
        finally:
            self.client.poll(0)

    def _wait(self, future: Future[Any], what: str) -> Any:
        """The future's value within the timeout (TimeoutError after it). A refused
        authentication ends the wait at once: waiting does not change the answer."""
        deadline = time.monotonic() + self.timeout + 5
        while True:
            left = deadline - time.monotonic()
            try:
                return future.result(timeout=max(min(_SLICE, left), 0.0))
            except TimeoutError:
                if left <= _SLICE:
                    raise
            self._stop_if_refused(what)

    def _stop_if_refused(self, what: str) -> None:
        self.client.poll(0)
        if self.options.log.authentication_failed():
            raise self._unreachable(what, KafkaError(KafkaError._AUTHENTICATION))

    def offsets(
        self, partitions: list[tuple[str, int]], spec: str | int
    ) -> dict[tuple[str, int], int | KafkaException]:
        """Each partition's offset for ``spec``: ``earliest`` (log start), ``latest``
        (high watermark) or a timestamp in ms (the first offset at or after it, -1 if
        none)."""
        if not partitions:
            return {}
        if spec == "earliest":
            offset_spec = OffsetSpec.earliest()
        elif spec == "latest":
            offset_spec = OffsetSpec.latest()
        else:
            offset_spec = OffsetSpec.for_timestamp(int(spec))
        futures = self.client.list_offsets(
            {TopicPartition(t, p): offset_spec for t, p in partitions}, **self.kwargs()
        )
        out: dict[tuple[str, int], int | KafkaException] = {}
        for tp, value in self.results(futures).items():
            out[(tp.topic, tp.partition)] = (
                value if isinstance(value, KafkaException) else value.offset
            )
        return out

    def positions(
        self, partitions: list[tuple[str, int]], position: Position
    ) -> dict[tuple[str, int], tuple[int, int, int]]:
        """Each partition's (log start, high watermark, the offset ``position`` names
        there, clamped to them by :func:`~logstore.cli.positions.resolve`); a partition
        whose start or end cannot be listed raises BrokerError."""
        starts, ends = self.offsets(partitions, "earliest"), self.offsets(partitions, "latest")
        at_time = self.offsets(partitions, position.value) if position.kind == "timestamp" else {}
        out: dict[tuple[str, int], tuple[int, int, int]] = {}
        for tp in partitions:
            start, end = starts[tp], ends[tp]
            if isinstance(start, KafkaException) or isinstance(end, KafkaException):
                raise BrokerError(
                    f"offsets of {tp[0]}-{tp[1]}",
                    start if isinstance(start, KafkaException) else end,
                )
            at = at_time.get(tp)
            out[tp] = (
                start,
                end,
                resolve(position, start, end, at if isinstance(at, int) else None),
            )
        return out
