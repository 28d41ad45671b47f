"""``ssl.principal.mapping.rules``: the name a TLS client certificate's subject DN
(RFC 2253 form) maps to, as Kafka's SslPrincipalMapper maps it.

The value is a comma-separated list of rules, tried in order:

- ``DEFAULT``: the DN itself;
- ``RULE:<pattern>/<replacement>/`` with an optional ``L`` (lower case) or ``U`` (upper
  case) after the last slash: when the regular expression matches the whole DN, the
  DN with every match replaced (``$1`` names a group, as in Java). ``\\/`` and ``\\,``
  stand for a slash or comma inside a pattern or replacement.

A DN that no rule maps cannot authenticate (:class:`NoMatchingRuleError`).
"""

from __future__ import annotations

import dataclasses
import re

from broker_py.config.kafka_config import ConfigError
from logstore.protocol.errors import KafkaException

KEY = "ssl.principal.mapping.rules"
_RULE = re.compile(r"RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?)")


class NoMatchingRuleError(KafkaException):
    """No ``ssl.principal.mapping.rules`` rule maps the certificate's DN."""


@dataclasses.dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self.replacement, dn)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _unescape(text: str) -> str:
    return re.sub(r"\\([/,])", r"\1", text)


def _java_replacement(text: str) -> str:
    """A Java replacement string (``$1``, ``\\$``) as Python's ``re.sub`` takes it."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            out.append("\\\\" if text[i + 1] == "\\" else text[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1 : j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


class SslPrincipalMapper:
    def __init__(self, rules: str, key: str = KEY) -> None:
        """ConfigError naming ``key`` for a value that is not a list of rules."""
        self._rules: list[_Rule] = []
        rest = rules.strip()
        while rest:
            if rest.startswith("DEFAULT") and (len(rest) == 7 or rest[7] in ", \t\n"):
                self._rules.append(_Rule(None))
                rest = rest[7:]
            else:
                m = _RULE.match(rest)
                if m is None:
                    raise ConfigError(
                        key, rules, f"{rest[:40]!r} is not DEFAULT or RULE:pattern/replacement/[LU]"
                    )
                try:
                    pattern = re.compile(_unescape(m[1]))
                except re.error as e:
                    raise ConfigError(key, rules, f"bad pattern {m[1]!r}: {e}") from None
                self._rules.append(_Rule(pattern, _java_replacement(_unescape(m[2])), m[3]))
                rest = rest[m.end() :]
            rest = rest.lstrip()
            if rest.startswith(","):
                rest = rest[1:].lstrip()
            elif rest:
                raise ConfigError(
                    key, rules, f"rules must be separated by commas near {rest[:40]!r}"
                )
        if not self._rules:
            raise ConfigError(key, rules, "no rule given (DEFAULT maps a DN to itself)")

    def name(self, dn: str) -> str:
        for rule in self._rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRuleError(f"no {KEY} rule maps {dn!r}")
