"""Kafka's ``ConfigDef`` value types and validators, with its messages: a value is
parsed from its string form (Java's ``String.trim`` first where Kafka trims) and checked
against a ``Range`` or ``ValidString``; a failure is :class:`ConfigError`, worded as
Kafka's ``ConfigException``: ``Invalid value <value> for configuration <key>: <reason>``.

=========  ====================================================  ===========================
type       parses                                                 failure reason
=========  ====================================================  ===========================
INT/LONG/  an optionally signed decimal within the type's width   ``Not a number of type INT``
SHORT
DOUBLE     Java's ``Double.parseDouble`` syntax                   ``Not a number of type DOUBLE``
BOOLEAN    ``true`` or ``false``, any case                        ``Expected value to be
                                                                  either true or false``
STRING     anything; ``ValidString.in`` lists the allowed ones    ``String must be one of: ..``
           ``CaseInsensitiveValidString.in``: any case, kept      ``String must be one of (case
           lower-cased                                            insensitive): ..``
LIST       comma-separated, blanks around items dropped           (per validator)
=========  ====================================================  ===========================

Ranges: ``Value must be at least N`` / ``Value must be no more than N``.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable
from typing import Any, TypeVar

from logstore.protocol.errors import KafkaException

LONG_MAX = (1 << 63) - 1

_P = TypeVar("_P", bound=Callable[[str, str], Any])

# The ConfigDef type (INT, LONG, SHORT, DOUBLE, BOOLEAN, STRING, LIST) each parser made
# here stands for: DescribeConfigs reports it.
_KINDS: dict[Callable[[str, str], Any], str] = {}


def _typed(kind: str, parse: _P) -> _P:
    _KINDS[parse] = kind
    return parse


def kind_of(parser: Callable[[str, str], Any]) -> str | None:
    """The ConfigDef type of a parser from this module; None for any other parser."""
    return _KINDS.get(parser)


class ConfigError(KafkaException):
    """A configuration value is invalid; ``key`` names the offending key. Worded as Kafka's
    ``ConfigException(name, value, message)``: ``Invalid value <value> for configuration
    <key>: <reason>``."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


class ConfigErrors(ConfigError):
    """Several invalid values, all reported at once (one line each); ``key``, ``value``
    and ``reason`` are the first's, ``errors`` holds every one."""

    def __init__(self, errors: list[ConfigError]) -> None:
        first = errors[0]
        super().__init__(first.key, first.value, first.reason)
        lines = "\n".join(f"  {e}" for e in errors)
        KafkaException.__init__(self, f"{len(errors)} invalid configuration values:\n{lines}")
        self.errors = errors


def raise_all(errors: list[ConfigError]) -> None:
    """Raises the one error, or :class:`ConfigErrors` for several; nothing for none."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ConfigErrors(errors)


# Kafka's ConfigDef number types: name -> bit width.
_BITS = {"SHORT": 16, "INT": 32, "LONG": 64}


def java_trim(raw: str) -> str:
    """Java's ``String.trim``: every char up to U+0020 off both ends."""
    return raw.strip("".join(map(chr, range(33))))


def int_type(
    lo: int | None = None, hi: int | None = None, kind: str = "INT"
) -> Callable[[str, str], int]:
    """A ConfigDef INT (or ``kind`` SHORT/LONG) with Kafka's Range validator."""
    bits = _BITS[kind]

    def parse(key: str, raw: str) -> int:
        text = java_trim(raw)
        if not re.fullmatch(r"[+-]?[0-9]+", text) or not (
            -(1 << (bits - 1)) <= int(text) < 1 << (bits - 1)
        ):
            raise ConfigError(key, raw, f"Not a number of type {kind}")
        value = int(text)
        if lo is not None and value < lo:
            raise ConfigError(key, value, f"Value must be at least {lo}")
        if hi is not None and value > hi:
            raise ConfigError(key, value, f"Value must be no more than {hi}")
        return value

    return _typed(kind, parse)


def long_type(lo: int | None = None, hi: int | None = None) -> Callable[[str, str], int]:
    return int_type(lo, hi, "LONG")


def short_type(lo: int | None = None, hi: int | None = None) -> Callable[[str, str], int]:
    return int_type(lo, hi, "SHORT")


def java_double(value: float) -> str:
    """Java's ``Double.toString``: plain from 1e-3 up to 1e7, else ``d.dddE<n>``."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    _sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    shown = "".join(map(str, digits))
    sign = "-" if value < 0 else ""
    return f"{sign}{shown[0]}.{shown[1:] or '0'}E{len(digits) - 1 + int(exponent)}"


_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?", re.ASCII)


def double_type(lo: float | None = None, hi: float | None = None) -> Callable[[str, str], float]:
    """A ConfigDef DOUBLE (Java's ``Double.parseDouble``) with Kafka's Range validator."""

    def parse(key: str, raw: str) -> float:
        text = java_trim(raw)
        if not _JAVA_DOUBLE.fullmatch(text):
            raise ConfigError(key, raw, "Not a number of type DOUBLE")
        value = float(text.rstrip("fFdD").replace("Infinity", "inf"))
        if lo is not None and value < lo:
            raise ConfigError(key, java_double(value), f"Value must be at least {lo}")
        if hi is not None and value > hi:
            raise ConfigError(key, java_double(value), f"Value must be no more than {hi}")
        return value

    return _typed("DOUBLE", parse)


def bool_type(key: str, raw: str) -> bool:
    v = java_trim(raw).lower()
    if v not in ("true", "false"):
        raise ConfigError(key, raw, "Expected value to be either true or false")
    return v == "true"


def str_type(key: str, raw: str) -> str:
    return raw.strip()


def choice_type(*allowed: str) -> Callable[[str, str], str]:
    """A STRING with Kafka's ``ValidString.in``."""

    def parse(key: str, raw: str) -> str:
        v = java_trim(raw)
        if v not in allowed:
            raise ConfigError(key, v, f"String must be one of: {', '.join(allowed)}")
        return v

    return _typed("STRING", parse)


def case_insensitive_choice_type(*allowed: str) -> Callable[[str, str], str]:
    """A STRING with Kafka's ``CaseInsensitiveValidString.in`` (``allowed`` in lower
    case); the value is returned in lower case."""

    def parse(key: str, raw: str) -> str:
        v = java_trim(raw)
        if v.lower() not in allowed:
            raise ConfigError(
                key, v, f"String must be one of (case insensitive): {', '.join(allowed)}"
            )
        return v.lower()

    return _typed("STRING", parse)


def list_type(key: str, raw: str) -> list[str]:
    return [p.strip() for p in raw.split(",") if p.strip()]


_typed("BOOLEAN", bool_type)
_typed("STRING", str_type)
_typed("LIST", list_type)
