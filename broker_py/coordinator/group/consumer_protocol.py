"""The consumer protocol's subscription, as members of a ``consumer`` group send it in
JoinGroup metadata (Kafka's ConsumerProtocolSubscription). Only the topics are read:

    version      int16
    topics       int32 count, then each topic as int16 length + UTF-8 bytes
    user_data    nullable bytes            (and, from v1 on, more fields)

Every version starts with these fields; the coordinator needs nothing else.
"""

from __future__ import annotations

import struct

from logstore.protocol.errors import KafkaException

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class InvalidSubscriptionError(KafkaException):
    """Member metadata that is not a consumer protocol subscription."""


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics a consumer subscription names."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        if version < 0:
            raise InvalidSubscriptionError(f"subscription version {version}")
        (count,) = _I32.unpack_from(metadata, 2)
        if count < 0 or count > len(metadata):
            raise InvalidSubscriptionError(
                f"subscription with {count} topics in {len(metadata)} bytes"
            )
        pos, topics = 6, []
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            if n < 0 or pos + 2 + n > len(metadata):
                raise InvalidSubscriptionError(f"topic name of {n} bytes at byte {pos}")
            topics.append(metadata[pos + 2 : pos + 2 + n].decode())
            pos += 2 + n
        return topics
    except (struct.error, UnicodeDecodeError) as e:
        raise InvalidSubscriptionError(f"malformed subscription: {e}") from None
