"""The configs of a CLIENT_METRICS resource (KIP-714), checked as Kafka's
``ClientMetricsConfigs`` checks them.

A resource is a named subscription with three keys, all optional:

=============  =====  ==========  ==================================================
key            type   default     meaning
=============  =====  ==========  ==================================================
metrics        LIST   (empty)     metric name prefixes to push; ``*`` means all,
                                  an empty list none
interval.ms    INT    300000      push interval, 100 to 3600000 (one hour)
match          LIST   (empty)     ``selector=regex`` items; a client matches when
                                  every regex matches its selector's value whole;
                                  no item matches every client
=============  =====  ==========  ==================================================

Selectors: ``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address``, ``client_source_port``. Regexes
are RE2 (google-re2), the syntax Kafka's RE2/J patterns share.

A LIST value is split as Kafka's ``ConfigDef`` splits it: the value trimmed, then on
commas with the blanks around them; an empty value is the empty list. An item of
``match`` is split on ``=`` as Java's ``String.split`` does (trailing empty parts
dropped): exactly two parts, the first a selector once trimmed, the second a regex once
trimmed; a later item of the same selector replaces an earlier one.

Errors, with Kafka's codes and texts: an empty resource name or an unknown key is
INVALID_REQUEST, as is an interval out of bounds; a value that does not parse
(``Not a number of type INT``) or an illegal match item is INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import re2

from logstore.protocol.errors import InvalidConfigError, InvalidRequestError

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
LIST_KEYS = frozenset({METRICS, MATCH})

ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
SELECTORS = frozenset(
    {
        CLIENT_INSTANCE_ID,
        CLIENT_ID,
        CLIENT_SOFTWARE_NAME,
        CLIENT_SOFTWARE_VERSION,
        CLIENT_SOURCE_ADDRESS,
        CLIENT_SOURCE_PORT,
    }
)

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad regex is answered, not logged to stderr by RE2
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_COMMA = re.compile(r"\s*,\s*")
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Subscription:
    """A resource's configs, parsed: ``match`` maps a selector to its compiled regex."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: Mapping[str, Any]


def split_list(value: str) -> list[str]:
    """A LIST value's items, as ConfigDef splits them."""
    trimmed = value.strip()
    return [] if not trimmed else _COMMA.split(trimmed)


def _parse_int(key: str, value: str) -> int:
    trimmed = value.strip()
    if _JAVA_INT.fullmatch(trimmed) is None or not _INT32_MIN <= int(trimmed) <= _INT32_MAX:
        raise InvalidConfigError(
            f"Invalid value {trimmed} for configuration {key}: Not a number of type INT"
        )
    return int(trimmed)


def parse_match(items: list[str]) -> dict[str, Any]:
    """selector -> compiled RE2 regex; InvalidConfigError names an illegal item."""
    out: dict[str, Any] = {}
    for item in items:
        parts = item.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        if len(parts) != 2 or parts[0].strip() not in SELECTORS:
            raise InvalidConfigError(f"Illegal client matching pattern: {item}")
        try:
            out[parts[0].strip()] = re2.compile(parts[1].strip(), _RE2_OPTIONS)
        except re2.error:
            raise InvalidConfigError(f"Illegal client matching pattern: {item}") from None
    return out


def validate(name: str, configs: Mapping[str, str]) -> Subscription:
    """Checks a resource's whole set of configs (the keys it keeps) and returns them
    parsed, missing keys at their defaults; raises InvalidRequestError or
    InvalidConfigError with Kafka's text."""
    if not name:
        raise InvalidRequestError("Subscription name can't be empty")
    for key in configs:
        if key not in KEYS:
            raise InvalidRequestError(f"Unknown client metrics configuration: {key}")
    interval = INTERVAL_MS_DEFAULT
    if INTERVAL_MS in configs:
        interval = _parse_int(INTERVAL_MS, configs[INTERVAL_MS])
    metrics = split_list(configs.get(METRICS, ""))
    match_items = split_list(configs.get(MATCH, ""))
    if INTERVAL_MS in configs and not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
        raise InvalidRequestError(
            f"Invalid value {interval} for {INTERVAL_MS}, interval must be between 100 and "
            "3600000 (1 hour)"
        )
    return Subscription(name, tuple(metrics), interval, parse_match(match_items))


def config_type(key: str) -> str:
    """``LIST`` or ``INT``, the key's ConfigDef type."""
    return "LIST" if key in LIST_KEYS else "INT"
