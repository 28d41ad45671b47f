"""Topic config values as people write them: durations for the ``*.ms`` configs.

Kafka's topic configs take milliseconds (``retention.ms=3600000``). A config whose name
ends in ``.ms`` also takes a duration, one or more ``<number><unit>`` terms with the
units ``ms``, ``s``, ``m``, ``h`` (Go's, as rpk writes durations), ``d`` (24 h) and
``w`` (7 d): ``1h``, ``30m``, ``1h30m``, ``7d``, ``1.5s``, ``500ms``, ``1w``. The
broker is sent the whole number of milliseconds. Any other value (``-1``,
``3600000``, a typo) is sent as written, for the broker to accept or name as
INVALID_CONFIG. Sizes (``*.bytes``) are bytes only, as in Kafka and rpk.
"""

from __future__ import annotations

import re
from decimal import Decimal

UNIT_MS = {
    "ms": Decimal(1),
    "s": Decimal(1000),
    "m": Decimal(60_000),
    "h": Decimal(3_600_000),
    "d": Decimal(86_400_000),
    "w": Decimal(604_800_000),
}

_TERM = r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)"
_DURATION = re.compile(rf"(?:{_TERM})+")
_TERMS = re.compile(_TERM)


def duration_ms(text: str) -> int | None:
    """The milliseconds of a duration such as ``1h30m``; None when ``text`` is not one."""
    text = text.strip()
    if not _DURATION.fullmatch(text):
        return None
    total = sum((Decimal(n) * UNIT_MS[unit] for n, unit in _TERMS.findall(text)), Decimal(0))
    return int(total.to_integral_value())


def config_value(key: str, value: str) -> str:
    """``value`` as the broker expects it for topic config ``key``."""
    if key.endswith(".ms"):
        ms = duration_ms(value)
        if ms is not None:
            return str(ms)
    return value
