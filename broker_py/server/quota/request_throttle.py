"""Client quotas applied to requests (Kafka's ``KafkaApis`` / ``RequestHandlerHelper``
throttling, KIP-219): the handler registry wrapped once, so every response type that
carries ``throttle_time_ms`` carries the throttle time, set in one place.

For each request of a client (user = principal name, client id from the request header):

- request quota (``request_percentage``): the rate the client's requests have earned so
  far gives the throttle time the request starts with; the handler's time on the event
  loop (its synchronous part and, for a handler that waits, each step it runs after a
  wait; in percent of a second) is recorded once it completes, and the throttle time
  that earns (at most one window, as Kafka) mutes the connection;
- byte quotas: Produce records its request's size and Fetch (consumers only) its
  response's bytes (:func:`record_bytes`), and encode the throttle time in the frames
  they build themselves;
- controller mutation quotas: CreateTopics, CreatePartitions and DeleteTopics take each
  topic's partitions from :func:`mutation_quota` (a topic refused when a strict quota is
  exceeded) and leave its throttle time on the connection (:func:`mutation_done`), on the
  broker the client sent them to; the controller does not count them again when that
  broker forwards them (client id ``broker-<id>-to-controller``, from a principal allowed
  CLUSTER_ACTION when there is an authorizer);
- a decoded response message with a ``throttle_time_ms`` field gets the larger of the
  throttle times; the network layer then sends it and mutes the connection for that
  long (``connection.throttle_ms``), other connections unaffected.

Requests exempt from the request quota, as Kafka exempts cluster actions: the
inter-broker and controller APIs, followers' Fetch requests and SASL authentication.
Each quota type's ``throttle-time`` sensor counts the throttle times it gave.
"""

from __future__ import annotations

import re
import time
import types
from collections.abc import Callable
from typing import Any

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.server.quota.client_quota_manager import ClientQuotaManager
from broker_py.server.quota.client_quotas import user_of
from broker_py.server.quota.controller_mutation_quota import STRICT_SINCE, MutationQuota
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.follower_fetch_frame import FollowerFetchFrame

EXEMPT = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.ALTER_PARTITION,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)
_NANOS_TO_PERCENT = 100 / 1e9
_HAS_THROTTLE: dict[type, bool] = {}
_COROUTINE = types.CoroutineType
# The client id of a broker's channel to the controller (broker_to_controller_channel).
_FORWARDING_CLIENT_ID = re.compile(r"broker-\d+-to-controller")


def client_of(connection: Any, request: Any) -> tuple[str, str]:
    """(user, client id) a request counts under."""
    return user_of(connection.principal), request.client_id or ""


def record_bytes(
    apis: Any, manager: ClientQuotaManager, connection: Any, request: Any, value: float
) -> int:
    """Records ``value`` bytes against the client's quota of ``manager``'s type; the
    request's throttle time after (the larger of this quota's and what the request
    started with), kept on the connection."""
    if connection is None:
        return 0
    started = getattr(connection, "throttle_ms", 0)
    if not manager.enabled:
        return started
    user, client_id = client_of(connection, request)
    now_ms = apis.time.milliseconds()
    throttle = manager.record(user, client_id, value, now_ms)
    if throttle > started:
        manager.record_throttle(user, client_id, throttle, now_ms)
        connection.throttle_ms = throttle
        return throttle
    return started


def mutation_quota(apis: Any, connection: Any, request: Any) -> MutationQuota | None:
    """The controller mutation quota one CreateTopics / CreatePartitions / DeleteTopics
    request is held to (None: no quota of that type anywhere)."""
    quotas = getattr(apis, "client_quotas", None)
    if quotas is None or connection is None or not quotas.controller_mutation.enabled:
        return None
    if _forwarded(apis, connection, request):
        return None
    user, client_id = client_of(connection, request)
    strict = request.api_version >= STRICT_SINCE[request.api_key]
    return quotas.controller_mutation.quota(user, client_id, strict)


def _forwarded(apis: Any, connection: Any, request: Any) -> bool:
    """A request another broker forwarded to this one, the controller (the quota was
    applied where the client sent it)."""
    if not _FORWARDING_CLIENT_ID.fullmatch(request.client_id or ""):
        return False
    if getattr(apis, "authorizer", None) is None:
        return True
    return bool(auth_helper.authorize_cluster(apis, connection, AclOperation.CLUSTER_ACTION))


def mutation_done(connection: Any, quota: MutationQuota | None) -> None:
    """The request's mutations are recorded: its throttle time goes to the connection."""
    if quota is not None and quota.throttle_time_ms > getattr(connection, "throttle_ms", 0):
        connection.throttle_ms = quota.throttle_time_ms


def throttled(apis: Any, registry: dict[Any, Callable[..., Any]]) -> dict[Any, Callable[..., Any]]:
    """The handler registry with client quotas applied (module docstring)."""
    return {key: _wrap(apis, key, fn) for key, fn in registry.items()}


def _stamp(response: Any, throttle_ms: int) -> Any:
    """``response`` with its ``throttle_time_ms`` set, when it is a message that has one."""
    if throttle_ms <= 0 or isinstance(response, (bytes, list)) or response is None:
        return response
    cls = type(response)
    has = _HAS_THROTTLE.get(cls)
    if has is None:
        schema = getattr(cls, "SCHEMA", None)
        fields = getattr(schema, "fields", None) or ()
        has = _HAS_THROTTLE[cls] = any(getattr(f, "name", "") == "throttle_time_ms" for f in fields)
    if has:
        response.throttle_time_ms = max(int(response.throttle_time_ms or 0), throttle_ms)
    return response


def _wrap(apis: Any, key: ApiKey, fn: Callable[..., Any]) -> Callable[..., Any]:
    exempt = key in EXEMPT
    # Produce and Fetch answer with frames they encode themselves, throttle time included.
    encodes_itself = key in (ApiKey.PRODUCE, ApiKey.FETCH)
    is_fetch = key is ApiKey.FETCH

    def handle(request: Any, connection: Any) -> Any:
        quotas = apis.client_quotas
        if connection is None or quotas is None:
            return fn(request, connection)
        connection.throttle_ms = 0
        manager = quotas.request
        if exempt or not manager.enabled or (is_fetch and _from_follower(request)):
            result = fn(request, connection)
            if encodes_itself:
                return result
        else:
            result = _timed(manager, fn, request, connection)
        if type(result) is _COROUTINE:  # a handler that waits
            return _when_done(result, connection)
        throttle = connection.throttle_ms
        return result if throttle <= 0 else _stamp(result, throttle)

    def _timed(manager: ClientQuotaManager, fn: Any, request: Any, connection: Any) -> Any:
        user, client_id = client_of(connection, request)
        connection.throttle_ms = manager.throttle_time(user, client_id, apis.time.milliseconds())
        start = time.perf_counter_ns()
        result = fn(request, connection)
        spent_ns = time.perf_counter_ns() - start
        if type(result) is _COROUTINE:
            return _record_when_done(result, spent_ns, manager, user, client_id, connection)
        _record(manager, user, client_id, spent_ns, connection)
        return result

    async def _record_when_done(
        pending: Any,
        spent_ns: int,
        manager: ClientQuotaManager,
        user: str,
        client_id: str,
        connection: Any,
    ) -> Any:
        """A waiting handler: its time is its synchronous part and each step it runs
        after a wait (reading, encoding), not the time it waits."""
        steps = _StepTimer(pending)
        try:
            return await steps
        finally:
            _record(manager, user, client_id, spent_ns + steps.spent_ns, connection)

    def _record(
        manager: ClientQuotaManager, user: str, client_id: str, spent_ns: int, connection: Any
    ) -> None:
        now_ms = apis.time.milliseconds()
        throttle = manager.record(user, client_id, spent_ns * _NANOS_TO_PERCENT, now_ms)
        if throttle > connection.throttle_ms:
            manager.record_throttle(user, client_id, throttle, now_ms)
            connection.throttle_ms = throttle

    return handle


def _from_follower(request: Any) -> bool:
    """A Fetch from a follower replica (its broker id in ``replica_id``, or from v15 in
    ``replica_state``)."""
    if type(request) is FollowerFetchFrame:
        return True
    body = request.body
    state = getattr(body, "replica_state", None)
    if state is not None and state.replica_id >= 0:
        return True
    replica_id = getattr(body, "replica_id", -1)
    return replica_id is not None and replica_id >= 0


class _StepTimer:
    """Awaits a coroutine, adding up in ``spent_ns`` the time each of its steps runs on
    the event loop (between the waits)."""

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.spent_ns = 0

    def __await__(self) -> Any:
        steps = self.coro.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            start = time.perf_counter_ns()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self.spent_ns += time.perf_counter_ns() - start
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as e:  # cancellation reaches the handler
                value, error = None, e


async def _when_done(pending: Any, connection: Any) -> Any:
    return _stamp(await pending, connection.throttle_ms)
