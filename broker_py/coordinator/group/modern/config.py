"""The broker configs of consumer groups on the consumer protocol, with Kafka's defaults.

group.consumer.session.timeout.ms       45000  within [min, max] session timeout
group.consumer.min.session.timeout.ms   45000  >= 1
group.consumer.max.session.timeout.ms   60000  >= min
group.consumer.heartbeat.interval.ms     5000  within [min, max] heartbeat interval,
                                               and below the session timeout
group.consumer.min.heartbeat.interval.ms 5000  >= 1
group.consumer.max.heartbeat.interval.ms 15000 >= min
group.consumer.max.size                 2^31-1 >= 1
group.consumer.assignors         uniform,range  names (or Kafka's class names) of the
                                               server-side assignors; the first is
                                               the default
group.consumer.regex.refresh.interval.ms 600000 >= 1; a resolved regex this old is
                                               resolved again on the group's next heartbeat
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

UNIFORM = "uniform"
RANGE = "range"

# Kafka's class names for its built-in assignors, accepted in group.consumer.assignors.
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}
BUILTIN_ASSIGNORS = (UNIFORM, RANGE)

DEFAULTS: dict[str, int | str] = {
    "group.consumer.session.timeout.ms": 45000,
    "group.consumer.min.session.timeout.ms": 45000,
    "group.consumer.max.session.timeout.ms": 60000,
    "group.consumer.heartbeat.interval.ms": 5000,
    "group.consumer.min.heartbeat.interval.ms": 5000,
    "group.consumer.max.heartbeat.interval.ms": 15000,
    "group.consumer.max.size": (1 << 31) - 1,
    "group.consumer.assignors": "uniform,range",
    "group.consumer.regex.refresh.interval.ms": 600000,
}


class ConsumerGroupConfigError(ValueError):
    """A value out of its bounds; ``key`` names the config."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key


def assignor_name(entry: str) -> str:
    """The built-in assignor an entry of group.consumer.assignors names."""
    name = _CLASS_NAMES.get(entry.strip(), entry.strip())
    if name not in BUILTIN_ASSIGNORS:
        raise ConsumerGroupConfigError(
            "group.consumer.assignors",
            entry,
            f"unknown assignor; the built-in assignors are {', '.join(BUILTIN_ASSIGNORS)}",
        )
    return name


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45000
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    heartbeat_interval_ms: int = 5000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000
    max_size: int = (1 << 31) - 1
    assignors: tuple[str, ...] = field(default=BUILTIN_ASSIGNORS)
    regex_refresh_interval_ms: int = 600000

    def __post_init__(self) -> None:
        for key, value in (
            ("group.consumer.session.timeout.ms", self.session_timeout_ms),
            ("group.consumer.min.session.timeout.ms", self.min_session_timeout_ms),
            ("group.consumer.max.session.timeout.ms", self.max_session_timeout_ms),
            ("group.consumer.heartbeat.interval.ms", self.heartbeat_interval_ms),
            ("group.consumer.min.heartbeat.interval.ms", self.min_heartbeat_interval_ms),
            ("group.consumer.max.heartbeat.interval.ms", self.max_heartbeat_interval_ms),
            ("group.consumer.max.size", self.max_size),
            ("group.consumer.regex.refresh.interval.ms", self.regex_refresh_interval_ms),
        ):
            if value < 1:
                raise ConsumerGroupConfigError(key, value, "Value must be at least 1")
        if self.max_session_timeout_ms < self.min_session_timeout_ms:
            raise ConsumerGroupConfigError(
                "group.consumer.max.session.timeout.ms",
                self.max_session_timeout_ms,
                "must be greater than or equal to group.consumer.min.session.timeout.ms",
            )
        if not (
            self.min_session_timeout_ms <= self.session_timeout_ms <= self.max_session_timeout_ms
        ):
            raise ConsumerGroupConfigError(
                "group.consumer.session.timeout.ms",
                self.session_timeout_ms,
                "must be within group.consumer.min.session.timeout.ms and "
                "group.consumer.max.session.timeout.ms",
            )
        if self.max_heartbeat_interval_ms < self.min_heartbeat_interval_ms:
            raise ConsumerGroupConfigError(
                "group.consumer.max.heartbeat.interval.ms",
                self.max_heartbeat_interval_ms,
                "must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            )
        if not (
            self.min_heartbeat_interval_ms
            <= self.heartbeat_interval_ms
            <= self.max_heartbeat_interval_ms
        ):
            raise ConsumerGroupConfigError(
                "group.consumer.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                "must be within group.consumer.min.heartbeat.interval.ms and "
                "group.consumer.max.heartbeat.interval.ms",
            )
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConsumerGroupConfigError(
                "group.consumer.heartbeat.interval.ms",
                self.heartbeat_interval_ms,
                "must be less than group.consumer.session.timeout.ms",
            )
        if not self.assignors:
            raise ConsumerGroupConfigError(
                "group.consumer.assignors", "", "at least one assignor is needed"
            )
        names = tuple(assignor_name(a) for a in self.assignors)
        if len(set(names)) != len(names):
            raise ConsumerGroupConfigError(
                "group.consumer.assignors", ",".join(self.assignors), "an assignor is repeated"
            )
        object.__setattr__(self, "assignors", names)

    @property
    def default_assignor(self) -> str:
        return self.assignors[0]

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> ConsumerGroupConfig:
        """From broker config values keyed by Kafka's names (missing keys take defaults).
        group.consumer.assignors may be a comma-separated string or a list."""

        def get_int(key: str) -> int:
            value = values.get(key, DEFAULTS[key])
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise ConsumerGroupConfigError(key, value, "not an integer")
            try:
                return int(value)
            except ValueError:
                raise ConsumerGroupConfigError(key, value, "not an integer") from None

        raw = values.get("group.consumer.assignors", DEFAULTS["group.consumer.assignors"])
        entries: Sequence[str]
        if isinstance(raw, str):
            entries = [e for e in (s.strip() for s in raw.split(",")) if e]
        elif isinstance(raw, list | tuple):
            entries = [str(e) for e in raw]
        else:
            raise ConsumerGroupConfigError("group.consumer.assignors", raw, "not a list")
        return cls(
            session_timeout_ms=get_int("group.consumer.session.timeout.ms"),
            min_session_timeout_ms=get_int("group.consumer.min.session.timeout.ms"),
            max_session_timeout_ms=get_int("group.consumer.max.session.timeout.ms"),
            heartbeat_interval_ms=get_int("group.consumer.heartbeat.interval.ms"),
            min_heartbeat_interval_ms=get_int("group.consumer.min.heartbeat.interval.ms"),
            max_heartbeat_interval_ms=get_int("group.consumer.max.heartbeat.interval.ms"),
            max_size=get_int("group.consumer.max.size"),
            assignors=tuple(entries),
            regex_refresh_interval_ms=get_int("group.consumer.regex.refresh.interval.ms"),
        )
