"""ZooKeeper's failures as the broker sees them, and how an admin request answers them.

A method wrapped in :func:`zk_failures` raises :class:`ZooKeeperError`, and only that, when
ZooKeeper fails (connection lost, session expired, a path it refuses); the outcomes it names
are its return values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from logstore.protocol.errors import KafkaError, KafkaException, UnknownServerError

__all__ = ["ZooKeeperClientTimeoutError", "ZooKeeperError", "zk_failure", "zk_failures"]


class ZooKeeperError(KafkaException):
    """ZooKeeper could not be reached or refused an operation."""


class ZooKeeperClientTimeoutError(ZooKeeperError):
    """No connection to ZooKeeper within ``zookeeper.connection.timeout.ms``."""


def zk_failure(e: ZooKeeperError) -> KafkaError:
    """How an admin request that could not reach ZooKeeper is answered: as Kafka answers an
    exception that is not an ApiException, UNKNOWN_SERVER_ERROR (with what failed)."""
    return UnknownServerError(f"ZooKeeper is not available: {e}")


def zk_failures(method: Callable) -> Callable:
    """ZooKeeper's own failures (kazoo's exceptions the method does not handle) as
    ZooKeeperError."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except (KazooException, KazooTimeoutError) as e:
            raise ZooKeeperError(f"ZooKeeper {method.__name__}: {e!r}") from e

    return wrapper
