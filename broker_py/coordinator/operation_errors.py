"""A coordinator's failed append as the client of the operation sees it (Kafka's
``CoordinatorOperationExceptionHelper``), shared by the group and share coordinators.

- UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT: the internal
  topic's partition cannot take the write now: COORDINATOR_NOT_AVAILABLE (retried);
- NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR: this broker no longer leads it:
  NOT_COORDINATOR (the client looks the coordinator up again);
- MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE: the coordinator wrote
  what it must not have: UNKNOWN_SERVER_ERROR;
- any other error (NONE included) is answered as it is.
"""

from __future__ import annotations

from logstore.protocol.error_codes import ErrorCode

_NOT_AVAILABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_SERVER_ERROR = frozenset(
    {
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.CORRUPT_MESSAGE,
    }
)


def operation_error(error: ErrorCode) -> ErrorCode:
    """The error a client gets for a coordinator append that failed with ``error``."""
    if error in _NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error in _SERVER_ERROR:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
