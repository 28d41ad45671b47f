"""The Kafka exception hierarchy, with one class per Kafka error code.

Every exception the protocol codec and the broker raise derives from :class:`KafkaException`.  Two
families sit under it:

* :class:`KafkaError`: one subclass per Kafka error code.  Each has
  ``errno`` (an :class:`ErrorCode`), ``retriable`` (whether a client may
  retry the same request) and ``description``.  Handlers raise these and
  response builders put ``exc.errno`` in the response's ``error_code``.
* :class:`ProtocolError`: the wire codec's failures (bad frames, malformed
  messages, values that cannot be encoded). The decoder raises them when the peer
  breaks the protocol; after a framing error the byte stream can no longer be
  trusted and the connection must be closed. :class:`EncodeError` is the one
  raised on our side: a response object holds a value its version cannot carry.

Class names follow the code names: ``UNKNOWN_TOPIC_OR_PARTITION`` is
:class:`UnknownTopicOrPartitionError`; a trailing ``_EXCEPTION`` or
``_ERROR`` is dropped (``INVALID_TOPIC_EXCEPTION`` is
:class:`InvalidTopicError`, ``KAFKA_STORAGE_ERROR`` is
:class:`KafkaStorageError`).
"""

from __future__ import annotations

from logstore.protocol.error_codes import ErrorCode

__all__ = [
    "CorruptFrameError",
    "EncodeError",
    "ErrorCode",
    "FrameTooLargeError",
    "KafkaError",
    "KafkaException",
    "MalformedMessageError",
    "ProtocolError",
    "TruncatedMessageError",
    "UnsupportedApiVersionError",
    "error_class",
    "raise_for_code",
]


class KafkaException(Exception):
    """Base of every exception of the Kafka protocol layer and of the broker built on it."""


class KafkaError(KafkaException):
    """An error that has a Kafka error code.

    Subclasses set ``errno``; ``retriable`` and ``description`` follow from
    it.  Each code has exactly one class that sets ``errno``; subclasses of
    that class refine it and keep its code.
    """

    errno: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    description: str = ErrorCode.UNKNOWN_SERVER_ERROR.description
    # Produce only: the records that made a batch be refused, as (index in the
    # batch, message) for the response's record_errors.
    record_errors: tuple[tuple[int, str], ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "errno" not in cls.__dict__:
            return  # a refinement of an existing code's class
        code = ErrorCode(cls.errno)  # type: ignore[call-arg]  # value lookup (mypy#10573)
        if code in _BY_CODE:
            raise TypeError(f"error code {code.name} already has class {_BY_CODE[code].__name__}")
        cls.errno = code
        cls.retriable = code.retriable
        cls.description = code.description
        _BY_CODE[code] = cls
        __all__.append(cls.__name__)

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else self.description)

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(errno={int(self.errno)}, message={self.message!r})"


_BY_CODE: dict[ErrorCode, type[KafkaError]] = {}


def error_class(code: int) -> type[KafkaError] | None:
    """The exception class for an error code; ``None`` for 0 (no error).

    A code missing from :class:`ErrorCode` maps to :class:`UnknownServerError`.
    """
    if code == 0:
        return None
    try:
        return _BY_CODE[ErrorCode(code)]  # type: ignore[call-arg]  # value lookup (mypy#10573)
    except ValueError:
        return UnknownServerError


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for ``code``; return quietly for 0."""
    cls = error_class(code)
    if cls is not None:
        raise cls(message)


# One class per error code, in code order.


class UnknownServerError(KafkaError):
    errno = ErrorCode.UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(KafkaError):
    errno = ErrorCode.OFFSET_OUT_OF_RANGE


class CorruptMessageError(KafkaError):
    errno = ErrorCode.CORRUPT_MESSAGE


class UnknownTopicOrPartitionError(KafkaError):
    errno = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidFetchSizeError(KafkaError):
    errno = ErrorCode.INVALID_FETCH_SIZE


class LeaderNotAvailableError(KafkaError):
    errno = ErrorCode.LEADER_NOT_AVAILABLE


class NotLeaderOrFollowerError(KafkaError):
    errno = ErrorCode.NOT_LEADER_OR_FOLLOWER


class RequestTimedOutError(KafkaError):
    errno = ErrorCode.REQUEST_TIMED_OUT


class BrokerNotAvailableError(KafkaError):
    errno = ErrorCode.BROKER_NOT_AVAILABLE


class ReplicaNotAvailableError(KafkaError):
    errno = ErrorCode.REPLICA_NOT_AVAILABLE


class MessageTooLargeError(KafkaError):
    errno = ErrorCode.MESSAGE_TOO_LARGE


class StaleControllerEpochError(KafkaError):
    errno = ErrorCode.STALE_CONTROLLER_EPOCH


class OffsetMetadataTooLargeError(KafkaError):
    errno = ErrorCode.OFFSET_METADATA_TOO_LARGE


class NetworkError(KafkaError):
    errno = ErrorCode.NETWORK_EXCEPTION


class CoordinatorLoadInProgressError(KafkaError):
    errno = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


class CoordinatorNotAvailableError(KafkaError):
    errno = ErrorCode.COORDINATOR_NOT_AVAILABLE


class NotCoordinatorError(KafkaError):
    errno = ErrorCode.NOT_COORDINATOR


class InvalidTopicError(KafkaError):
    errno = ErrorCode.INVALID_TOPIC_EXCEPTION


class RecordListTooLargeError(KafkaError):
    errno = ErrorCode.RECORD_LIST_TOO_LARGE


class NotEnoughReplicasError(KafkaError):
    errno = ErrorCode.NOT_ENOUGH_REPLICAS


class NotEnoughReplicasAfterAppendError(KafkaError):
    errno = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


class InvalidRequiredAcksError(KafkaError):
    errno = ErrorCode.INVALID_REQUIRED_ACKS


class IllegalGenerationError(KafkaError):
    errno = ErrorCode.ILLEGAL_GENERATION


class InconsistentGroupProtocolError(KafkaError):
    errno = ErrorCode.INCONSISTENT_GROUP_PROTOCOL


class InvalidGroupIdError(KafkaError):
    errno = ErrorCode.INVALID_GROUP_ID


class UnknownMemberIdError(KafkaError):
    errno = ErrorCode.UNKNOWN_MEMBER_ID


class InvalidSessionTimeoutError(KafkaError):
    errno = ErrorCode.INVALID_SESSION_TIMEOUT


class RebalanceInProgressError(KafkaError):
    errno = ErrorCode.REBALANCE_IN_PROGRESS


class InvalidCommitOffsetSizeError(KafkaError):
    errno = ErrorCode.INVALID_COMMIT_OFFSET_SIZE


class TopicAuthorizationFailedError(KafkaError):
    errno = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class GroupAuthorizationFailedError(KafkaError):
    errno = ErrorCode.GROUP_AUTHORIZATION_FAILED


class ClusterAuthorizationFailedError(KafkaError):
    errno = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class InvalidTimestampError(KafkaError):
    errno = ErrorCode.INVALID_TIMESTAMP


class UnsupportedSaslMechanismError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslStateError(KafkaError):
    errno = ErrorCode.ILLEGAL_SASL_STATE


class UnsupportedVersionError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_VERSION


class TopicAlreadyExistsError(KafkaError):
    errno = ErrorCode.TOPIC_ALREADY_EXISTS


class InvalidPartitionsError(KafkaError):
    errno = ErrorCode.INVALID_PARTITIONS


class InvalidReplicationFactorError(KafkaError):
    errno = ErrorCode.INVALID_REPLICATION_FACTOR


class InvalidReplicaAssignmentError(KafkaError):
    errno = ErrorCode.INVALID_REPLICA_ASSIGNMENT


class InvalidConfigError(KafkaError):
    errno = ErrorCode.INVALID_CONFIG


class NotControllerError(KafkaError):
    errno = ErrorCode.NOT_CONTROLLER


class InvalidRequestError(KafkaError):
    errno = ErrorCode.INVALID_REQUEST


class UnsupportedForMessageFormatError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


class PolicyViolationError(KafkaError):
    errno = ErrorCode.POLICY_VIOLATION


class OutOfOrderSequenceNumberError(KafkaError):
    errno = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class DuplicateSequenceNumberError(KafkaError):
    errno = ErrorCode.DUPLICATE_SEQUENCE_NUMBER


class InvalidProducerEpochError(KafkaError):
    errno = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidTxnStateError(KafkaError):
    errno = ErrorCode.INVALID_TXN_STATE


class InvalidProducerIdMappingError(KafkaError):
    errno = ErrorCode.INVALID_PRODUCER_ID_MAPPING


class InvalidTransactionTimeoutError(KafkaError):
    errno = ErrorCode.INVALID_TRANSACTION_TIMEOUT


class ConcurrentTransactionsError(KafkaError):
    errno = ErrorCode.CONCURRENT_TRANSACTIONS


class TransactionCoordinatorFencedError(KafkaError):
    errno = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class TransactionalIdAuthorizationFailedError(KafkaError):
    errno = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class SecurityDisabledError(KafkaError):
    errno = ErrorCode.SECURITY_DISABLED


class OperationNotAttemptedError(KafkaError):
    errno = ErrorCode.OPERATION_NOT_ATTEMPTED


class KafkaStorageError(KafkaError):
    errno = ErrorCode.KAFKA_STORAGE_ERROR


class LogDirNotFoundError(KafkaError):
    errno = ErrorCode.LOG_DIR_NOT_FOUND


class SaslAuthenticationFailedError(KafkaError):
    errno = ErrorCode.SASL_AUTHENTICATION_FAILED


class UnknownProducerIdError(KafkaError):
    errno = ErrorCode.UNKNOWN_PRODUCER_ID


class ReassignmentInProgressError(KafkaError):
    errno = ErrorCode.REASSIGNMENT_IN_PROGRESS


class DelegationTokenAuthDisabledError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


class DelegationTokenNotFoundError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_NOT_FOUND


class DelegationTokenOwnerMismatchError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH


class DelegationTokenRequestNotAllowedError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


class DelegationTokenAuthorizationFailedError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED


class DelegationTokenExpiredError(KafkaError):
    errno = ErrorCode.DELEGATION_TOKEN_EXPIRED


class InvalidPrincipalTypeError(KafkaError):
    errno = ErrorCode.INVALID_PRINCIPAL_TYPE


class NonEmptyGroupError(KafkaError):
    errno = ErrorCode.NON_EMPTY_GROUP


class GroupIdNotFoundError(KafkaError):
    errno = ErrorCode.GROUP_ID_NOT_FOUND


class FetchSessionIdNotFoundError(KafkaError):
    errno = ErrorCode.FETCH_SESSION_ID_NOT_FOUND


class InvalidFetchSessionEpochError(KafkaError):
    errno = ErrorCode.INVALID_FETCH_SESSION_EPOCH


class ListenerNotFoundError(KafkaError):
    errno = ErrorCode.LISTENER_NOT_FOUND


class TopicDeletionDisabledError(KafkaError):
    errno = ErrorCode.TOPIC_DELETION_DISABLED


class FencedLeaderEpochError(KafkaError):
    errno = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(KafkaError):
    errno = ErrorCode.UNKNOWN_LEADER_EPOCH


class UnsupportedCompressionTypeError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class StaleBrokerEpochError(KafkaError):
    errno = ErrorCode.STALE_BROKER_EPOCH


class OffsetNotAvailableError(KafkaError):
    errno = ErrorCode.OFFSET_NOT_AVAILABLE


class MemberIdRequiredError(KafkaError):
    errno = ErrorCode.MEMBER_ID_REQUIRED


class PreferredLeaderNotAvailableError(KafkaError):
    errno = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


class GroupMaxSizeReachedError(KafkaError):
    errno = ErrorCode.GROUP_MAX_SIZE_REACHED


class FencedInstanceIdError(KafkaError):
    errno = ErrorCode.FENCED_INSTANCE_ID


class EligibleLeadersNotAvailableError(KafkaError):
    errno = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


class ElectionNotNeededError(KafkaError):
    errno = ErrorCode.ELECTION_NOT_NEEDED


class NoReassignmentInProgressError(KafkaError):
    errno = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class GroupSubscribedToTopicError(KafkaError):
    errno = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC


class InvalidRecordError(KafkaError):
    errno = ErrorCode.INVALID_RECORD


class UnstableOffsetCommitError(KafkaError):
    errno = ErrorCode.UNSTABLE_OFFSET_COMMIT


class ThrottlingQuotaExceededError(KafkaError):
    errno = ErrorCode.THROTTLING_QUOTA_EXCEEDED


class ProducerFencedError(KafkaError):
    errno = ErrorCode.PRODUCER_FENCED


class ResourceNotFoundError(KafkaError):
    errno = ErrorCode.RESOURCE_NOT_FOUND


class DuplicateResourceError(KafkaError):
    errno = ErrorCode.DUPLICATE_RESOURCE


class UnacceptableCredentialError(KafkaError):
    errno = ErrorCode.UNACCEPTABLE_CREDENTIAL


class InconsistentVoterSetError(KafkaError):
    errno = ErrorCode.INCONSISTENT_VOTER_SET


class InvalidUpdateVersionError(KafkaError):
    errno = ErrorCode.INVALID_UPDATE_VERSION


class FeatureUpdateFailedError(KafkaError):
    errno = ErrorCode.FEATURE_UPDATE_FAILED


class PrincipalDeserializationFailureError(KafkaError):
    errno = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE


class SnapshotNotFoundError(KafkaError):
    errno = ErrorCode.SNAPSHOT_NOT_FOUND


class UnknownTopicIdError(KafkaError):
    errno = ErrorCode.UNKNOWN_TOPIC_ID


class DuplicateBrokerRegistrationError(KafkaError):
    errno = ErrorCode.DUPLICATE_BROKER_REGISTRATION


class BrokerIdNotRegisteredError(KafkaError):
    errno = ErrorCode.BROKER_ID_NOT_REGISTERED


class InconsistentTopicIdError(KafkaError):
    errno = ErrorCode.INCONSISTENT_TOPIC_ID


class InconsistentClusterIdError(KafkaError):
    errno = ErrorCode.INCONSISTENT_CLUSTER_ID


class TransactionalIdNotFoundError(KafkaError):
    errno = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND


class FetchSessionTopicIdError(KafkaError):
    errno = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR


class IneligibleReplicaError(KafkaError):
    errno = ErrorCode.INELIGIBLE_REPLICA


class NewLeaderElectedError(KafkaError):
    errno = ErrorCode.NEW_LEADER_ELECTED


class OffsetMovedToTieredStorageError(KafkaError):
    errno = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE


class FencedMemberEpochError(KafkaError):
    errno = ErrorCode.FENCED_MEMBER_EPOCH


class UnreleasedInstanceIdError(KafkaError):
    errno = ErrorCode.UNRELEASED_INSTANCE_ID


class UnsupportedAssignorError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_ASSIGNOR


class StaleMemberEpochError(KafkaError):
    errno = ErrorCode.STALE_MEMBER_EPOCH


class MismatchedEndpointTypeError(KafkaError):
    errno = ErrorCode.MISMATCHED_ENDPOINT_TYPE


class UnsupportedEndpointTypeError(KafkaError):
    errno = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


class UnknownControllerIdError(KafkaError):
    errno = ErrorCode.UNKNOWN_CONTROLLER_ID


class UnknownSubscriptionIdError(KafkaError):
    errno = ErrorCode.UNKNOWN_SUBSCRIPTION_ID


class TelemetryTooLargeError(KafkaError):
    errno = ErrorCode.TELEMETRY_TOO_LARGE


class InvalidRegistrationError(KafkaError):
    errno = ErrorCode.INVALID_REGISTRATION


class TransactionAbortableError(KafkaError):
    errno = ErrorCode.TRANSACTION_ABORTABLE


class InvalidRecordStateError(KafkaError):
    errno = ErrorCode.INVALID_RECORD_STATE


class ShareSessionNotFoundError(KafkaError):
    errno = ErrorCode.SHARE_SESSION_NOT_FOUND


class InvalidShareSessionEpochError(KafkaError):
    errno = ErrorCode.INVALID_SHARE_SESSION_EPOCH


class FencedStateEpochError(KafkaError):
    errno = ErrorCode.FENCED_STATE_EPOCH


class InvalidVoterKeyError(KafkaError):
    errno = ErrorCode.INVALID_VOTER_KEY


class DuplicateVoterError(KafkaError):
    errno = ErrorCode.DUPLICATE_VOTER


class VoterNotFoundError(KafkaError):
    errno = ErrorCode.VOTER_NOT_FOUND


class InvalidRegularExpressionError(KafkaError):
    errno = ErrorCode.INVALID_REGULAR_EXPRESSION


class RebootstrapRequiredError(KafkaError):
    errno = ErrorCode.REBOOTSTRAP_REQUIRED


class StreamsInvalidTopologyError(KafkaError):
    errno = ErrorCode.STREAMS_INVALID_TOPOLOGY


class StreamsInvalidTopologyEpochError(KafkaError):
    errno = ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH


class StreamsTopologyFencedError(KafkaError):
    errno = ErrorCode.STREAMS_TOPOLOGY_FENCED


class ShareSessionLimitReachedError(KafkaError):
    errno = ErrorCode.SHARE_SESSION_LIMIT_REACHED


# The wire codec's failures.
class ProtocolError(KafkaException):
    """The wire codec could not decode or encode something."""


class CorruptFrameError(ProtocolError):
    """The size prefix or request header of a frame is unusable.

    Raised for a negative size, or for a frame too short to hold the fixed
    part of a request header (api key, api version, correlation id).
    """


class FrameTooLargeError(CorruptFrameError):
    """A frame declares more bytes than ``socket.request.max.bytes`` allows.

    Raised as soon as the 4-byte size prefix is seen, before any of the
    body is buffered.
    """

    def __init__(self, size: int, max_size: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {max_size} bytes")
        self.size = size
        self.max_size = max_size


class MalformedMessageError(ProtocolError):
    """A message (header or body) does not parse at its declared version.

    When the request header was read, ``api_key``, ``api_version`` and
    ``correlation_id`` say which request was at fault; otherwise they are
    ``None``.
    """

    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None


class TruncatedMessageError(MalformedMessageError):
    """A message ended before a field it declares was complete."""


class UnsupportedApiVersionError(ProtocolError):
    """A message was asked for at an api key or version this codec lacks."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"api key {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version


class EncodeError(ProtocolError):
    """A value cannot be written at the requested version.

    Examples: ``None`` in a field that is not nullable at that version, an
    integer outside its type's range, a string longer than int16 length
    allows, or deferred records where bytes are required.
    """
