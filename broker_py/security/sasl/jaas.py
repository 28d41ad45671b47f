"""JAAS login module configuration, as Kafka's ``sasl.jaas.config`` values hold it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

One login module: its class name, a control flag (required, requisite, sufficient or
optional), options as ``name=value`` with the value quoted (``\\"`` and ``\\\\`` escape
inside quotes) or a bare word, and a closing ``;``.
"""

from __future__ import annotations

import dataclasses
import re

from broker_py.config.kafka_config import ConfigError

_FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s*(?:(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<word>[^\s=;"]+)|(?P<sym>[=;]))')


@dataclasses.dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str]


def parse(key: str, raw: str) -> LoginModule:
    """The login module in ``raw``; ConfigError naming ``key`` (not the value, which
    holds passwords) if it is not one well-formed module."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = raw.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(key, "(hidden)", f"unexpected text at character {pos}")
        pos = m.end()
        if m["quoted"] is not None:
            tokens.append(("value", re.sub(r"\\(.)", r"\1", m["quoted"][1:-1])))
        elif m["word"] is not None:
            tokens.append(("word", m["word"]))
        elif m["sym"] is not None:
            tokens.append(("sym", m["sym"]))
    if (
        len(tokens) < 3
        or tokens[0][0] != "word"
        or tokens[1] not in (("word", f) for f in _FLAGS)
        or tokens[-1] != ("sym", ";")
    ):
        raise ConfigError(
            key,
            "(hidden)",
            "expected '<LoginModule class> <required|requisite|sufficient|optional> "
            'name="value" ... ;\'',
        )
    options: dict[str, str] = {}
    body = tokens[2:-1]
    if len(body) % 3:
        raise ConfigError(key, "(hidden)", "options must be name=value pairs")
    for i in range(0, len(body), 3):
        (k_kind, name), eq, (v_kind, value) = body[i], body[i + 1], body[i + 2]
        if k_kind != "word" or eq != ("sym", "=") or v_kind not in ("value", "word"):
            raise ConfigError(key, "(hidden)", "options must be name=value pairs")
        options[name] = value
    return LoginModule(tokens[0][1], tokens[1][1], options)
