"""The retry budget of one call: how often and how long a call that failed for a reason
that may pass (a leader moved or is being elected, a broker is down) is tried again,
the backoff between tries, and the error raised when the budget is spent.

Budget
------

A call is tried at most ``max_attempts`` times (``None``: no count limit) and is not
tried again once ``timeout_s`` seconds have passed since its first try began: a retry
whose backoff would end past that moment is not made.  The backoff before the n-th
retry (n >= 1) is ``min(backoff_s * 2 ** (n - 1), backoff_max_s)``, Kafka's
``retry.backoff.ms`` / ``retry.backoff.max.ms`` without the jitter.  A retry that a
KIP-951 leader hint made (the client already knows where to go) waits no backoff and
does not double the next one, but counts as an attempt.

Invariant: a :class:`RetryState` only moves forward: ``attempts`` and ``retries``
never decrease, and a spent state stays spent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from logstore.spark.kafka_client.errors import KafkaClientError, KafkaResponseError


@dataclass(frozen=True)
class RetryPolicy:
    """The budget of every call of one client (see the module docstring)."""

    timeout_s: float
    max_attempts: int | None
    backoff_s: float
    backoff_max_s: float

    def __post_init__(self) -> None:
        if not self.timeout_s >= 0:
            raise ValueError(f"retry timeout must be >= 0 s, not {self.timeout_s!r}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1 or None, not {self.max_attempts!r}")
        if not 0 <= self.backoff_s <= self.backoff_max_s:
            raise ValueError(
                f"need 0 <= backoff ({self.backoff_s!r}) <= max backoff ({self.backoff_max_s!r})"
            )

    def backoff(self, retry: int) -> float:
        """Seconds to wait before the ``retry``-th backed-off retry (1-based)."""
        return min(self.backoff_s * 2 ** min(retry - 1, 62), self.backoff_max_s)

    def start(
        self,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RetryState:
        """The state of one call whose first try begins now."""
        return RetryState(self, clock, sleep)


class RetryState:
    """One call's progress through its :class:`RetryPolicy`.

    The call makes its first try, then asks :meth:`retry` before each further
    one; ``False`` means the budget is spent and the call must give up (with
    :meth:`gave_up`).
    """

    def __init__(
        self, policy: RetryPolicy, clock: Callable[[], float], sleep: Callable[[float], None]
    ) -> None:
        self.policy = policy
        self._clock = clock
        self._sleep = sleep
        self.started = clock()
        self.attempts = 1  # the first try is under way
        self.retries = 0  # backed-off retries so far
        self.spent = False

    @property
    def elapsed(self) -> float:
        return self._clock() - self.started

    def retry(self, *, backoff: bool = True) -> bool:
        """Wait the backoff (none when ``backoff`` is false) and count one more
        attempt; ``False``, without waiting, when that attempt is over budget."""
        policy = self.policy
        if self.spent or (policy.max_attempts is not None and self.attempts >= policy.max_attempts):
            self.spent = True
            return False
        delay = policy.backoff(self.retries + 1) if backoff else 0.0
        if self.elapsed + delay > policy.timeout_s:
            self.spent = True
            return False
        if delay > 0:
            self._sleep(delay)
        if backoff:
            self.retries += 1
        self.attempts += 1
        return True

    def gave_up(
        self, last: KafkaClientError, what: str, topic: str | None, partition: int | None
    ) -> KafkaClientError:
        """The error to raise when the budget is spent: of ``last``'s class (same
        ``errno``, ``retriable``), its message prefixed with the call, the partition
        (or topic) and the budget used, ``topic``, ``partition`` and ``attempts``
        set.  Raise it ``from last``."""
        where = (
            "" if topic is None else f" {topic}" if partition is None else f" {topic}-{partition}"
        )
        message = (
            f"{what}{where}: gave up after {self.attempts} attempt(s) in {self.elapsed:.1f} s "
            f"(retry budget {self.policy.timeout_s:g} s"
            + (
                f", {self.policy.max_attempts} attempts"
                if self.policy.max_attempts is not None
                else ""
            )
            + f"); last error: {last}"
        )
        error: KafkaClientError
        if isinstance(last, KafkaResponseError):
            error = type(last)(message, errno=last.errno, topic=topic, partition=partition)
        else:
            error = type(last)(message)
            error.topic, error.partition = topic, partition
        error.attempts = self.attempts
        return error
