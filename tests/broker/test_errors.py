"""One exception class per Kafka error code, under one hierarchy."""

from __future__ import annotations

import pytest

from logstore.protocol import errors
from logstore.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaException,
    ProtocolError,
    error_class,
    raise_for_code,
)


def test_every_code_has_exactly_one_class() -> None:
    classes = [getattr(errors, name) for name in errors.__all__]
    kafka_classes = [
        c
        for c in classes
        if isinstance(c, type) and issubclass(c, KafkaError) and c is not KafkaError
    ]
    codes = [c.errno for c in kafka_classes]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(ErrorCode) - {ErrorCode.NONE}
    for cls in kafka_classes:
        assert error_class(cls.errno) is cls


@pytest.mark.parametrize(
    ("cls", "code", "retriable"),
    [
        (errors.UnknownTopicOrPartitionError, 3, True),
        (errors.OffsetOutOfRangeError, 1, False),
        (errors.CorruptMessageError, 2, True),
        (errors.MessageTooLargeError, 10, False),
        (errors.UnsupportedVersionError, 35, False),
        (errors.IllegalGenerationError, 22, False),
        (errors.UnknownMemberIdError, 25, False),
        (errors.RebalanceInProgressError, 27, False),
        (errors.InvalidConfigError, 40, False),
        (errors.TopicAlreadyExistsError, 36, False),
        (errors.InvalidPartitionsError, 37, False),
        (errors.InvalidTopicError, 17, False),
        (errors.NotLeaderOrFollowerError, 6, True),
        (errors.NotCoordinatorError, 16, True),
        (errors.CoordinatorLoadInProgressError, 14, True),
        (errors.RequestTimedOutError, 7, True),
        (errors.UnknownServerError, -1, False),
        (errors.InvalidRequestError, 42, False),
        (errors.KafkaStorageError, 56, True),
        (errors.UnknownTopicIdError, 100, True),
    ],
)
def test_known_codes(cls: type[KafkaError], code: int, retriable: bool) -> None:
    assert cls.errno == code
    assert cls.retriable is retriable
    exc = cls()
    assert exc.errno == code and exc.message == ErrorCode(code).description
    assert isinstance(exc, KafkaError) and isinstance(exc, KafkaException)


def test_lookup_and_raise() -> None:
    assert error_class(0) is None
    assert error_class(12345) is errors.UnknownServerError
    raise_for_code(0)
    with pytest.raises(errors.NotControllerError, match="not the controller"):
        raise_for_code(41, "not the controller")


def test_custom_message_and_repr() -> None:
    exc = errors.InvalidTopicError("topic name has a slash")
    assert str(exc) == "topic name has a slash"
    assert repr(exc) == "InvalidTopicError(errno=17, message='topic name has a slash')"


def test_one_hierarchy() -> None:
    assert issubclass(KafkaError, KafkaException)
    assert issubclass(ProtocolError, KafkaException)
    assert not issubclass(ProtocolError, KafkaError)


def test_a_code_cannot_get_two_classes() -> None:
    with pytest.raises(TypeError):
        type("Duplicate", (KafkaError,), {"errno": ErrorCode.OFFSET_OUT_OF_RANGE})


def test_refining_a_code_class_keeps_its_code() -> None:
    class PurgatoryTimeout(errors.RequestTimedOutError):
        pass

    assert PurgatoryTimeout.errno == ErrorCode.REQUEST_TIMED_OUT and PurgatoryTimeout.retriable
    assert error_class(7) is errors.RequestTimedOutError
