"""What librdkafka said while a command ran, and why it could not reach a broker, in words.

Every librdkafka client of one command (AdminClient, Producer, Consumer) reports to the
command's :class:`ClientLog`: the errors of its ``error_cb`` (codes such as ``_RESOLVE``,
``_TRANSPORT``, ``_AUTHENTICATION``) and its log lines (``logger``), the last
:data:`KEEP` of each. librdkafka hands both over only when the client is polled, so a
command polls its client before it asks :meth:`ClientLog.cause`. With ``-v`` the log
lines also go to stderr as ``librdkafka: <FACILITY> [<client>] <text>``, and librdkafka
logs its broker and security steps (``debug=broker,security``) unless ``-X debug=...``
says otherwise.

:meth:`ClientLog.cause` names what went wrong, from the errors (or, if none came, from
the log lines), the first that applies:

- an authentication error: ``authentication failed: SASL SCRAM-SHA-256 for user 'alice'
  (wrong user name or password?)``, or with the broker's reason when it is not about the
  credentials (a mechanism the listener does not enable, a listener without SASL);
- a name that does not resolve: ``cannot resolve host 'nohost.invalid'``;
- a refused connection: ``connection refused by 127.0.0.1:1: is a broker listening
  there?``;
- a connection the broker closed at once: ``127.0.0.1:9092 closed the connection: does
  its listener need SASL (--user, --password) or TLS (--tls)?``;
- another transport or TLS error: librdkafka's text without its ``(after N ms in state
  S)`` tail, e.g. ``127.0.0.1:9092: SSL handshake failed: ...``;
- nothing said: ``no answer from <brokers> within <timeout>s (--timeout)``.

Each broker gets the first cause found for it; several are joined with ``; ``.
"""

from __future__ import annotations

import collections
import logging
import re
import sys
from typing import Any

from confluent_kafka import KafkaError

KEEP = 200
VERBOSE_DEBUG = "broker,security"

# librdkafka's texts (2.x): "<broker>: Connect to ipv4#127.0.0.1:1 failed: Connection
# refused (after 0ms in state CONNECT)", "<broker>: Failed to resolve 'nohost.invalid:9092':
# Name or service not known (...)", "<broker>: SASL authentication error: <the broker's
# reason> (...)", "<broker>: SASL PLAIN mechanism handshake failed: Broker: <error> (...)".
_REFUSED = re.compile(r"Connect to (?:ipv[46]#)?(?P<address>\S+) failed: Connection refused")
_RESOLVE = re.compile(r"Failed to resolve '(?P<host>.*?)(?::(?P<port>\d+))?'")
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+\)\s*$")
_SASL = re.compile(r"SASL (?:authentication error|.*handshake failed): (?P<reason>.*)$")
_MECHANISMS = re.compile(r"broker's supported mechanisms: ?(?P<mechanisms>.*)$")
_BAD_CREDENTIALS = re.compile(r"invalid (?:user|credentials|username|password)", re.IGNORECASE)
_TIMED_OUT = re.compile(r"timed out", re.IGNORECASE)
_CONNECTION_ERRORS = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._RESOLVE,
        KafkaError._AUTHENTICATION,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._SSL,
    }
)
# The broker an error is about: "[<protocol>://]<host:port>/<bootstrap|node id>: <text>".
_BROKER = re.compile(r"^(?:\w+://)?(?P<address>\S+?)/(?:bootstrap|-?\d+): (?P<text>.*)$")
_CLOSED = re.compile(r"^Disconnected: connection (?:closed|reset) by peer")
# A log line: "<FACILITY> [<client name>] [thrd:<thread>]: <text>".
_LOG_PREFIX = re.compile(r"^\w+ \[[^\]]*\] \[[^\]]*\]:\s*")


class ClientLog(logging.Handler):
    """The errors and log lines of one command's librdkafka clients."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__(logging.DEBUG)
        self.errors: collections.deque[KafkaError] = collections.deque(maxlen=KEEP)
        self.lines: collections.deque[str] = collections.deque(maxlen=KEEP)
        self.verbose = verbose
        # What the clients were configured with (set by ClientOptions.config()).
        self.brokers = ""
        self.timeout = 10.0
        self.mechanism: str | None = None
        self.user: str | None = None
        # The logger librdkafka's lines go to: not registered with logging, one per command.
        self.logger = logging.Logger("logstore.cli.librdkafka", logging.DEBUG)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        self.lines.append(line)
        if self.verbose:
            print(f"librdkafka: {line}", file=sys.stderr, flush=True)

    def error(self, err: KafkaError) -> None:
        """librdkafka's ``error_cb``."""
        self.errors.append(err)

    def settings(self) -> dict[str, Any]:
        """The librdkafka properties that report to this log."""
        return {"logger": self.logger, "error_cb": self.error}

    def unreachable(self) -> bool:
        """Whether a client reported a broker it could not reach or authenticate with."""
        return any(e.code() in _CONNECTION_ERRORS for e in self.errors)

    def authentication_failed(self) -> bool:
        """Whether a client reported a refused SASL authentication (final: retrying
        with the same credentials gets the same answer)."""
        return any(e.code() == KafkaError._AUTHENTICATION for e in self.errors) or any(
            line.startswith("FAIL ") and _SASL.search(line) for line in self.lines
        )

    def cause(self) -> str:
        """Why no broker answered, in words (see the module's docstring)."""
        texts: list[tuple[int | None, str]] = [(e.code(), e.str()) for e in self.errors]
        if not any(code != KafkaError._ALL_BROKERS_DOWN for code, _ in texts):
            texts = [
                (None, _LOG_PREFIX.sub("", line)) for line in self.lines if line.startswith("FAIL ")
            ]
        for code, text in texts:
            if code == KafkaError._AUTHENTICATION or (code is None and _SASL.search(text)):
                return self._authentication(text)
        causes: dict[str, str] = {}  # broker -> the first cause found for it
        for code, text in texts:
            if code != KafkaError._ALL_BROKERS_DOWN:
                m = _BROKER.match(_AFTER.sub("", text))
                address, detail = (m["address"], m["text"]) if m else ("", _AFTER.sub("", text))
                if detail and address not in causes:
                    causes[address] = self._connection(code, address, detail)
        return "; ".join(dict.fromkeys(causes.values())) or self.no_answer()

    def no_answer(self) -> str:
        return f"no answer from {self.brokers} within {self.timeout:g}s (--timeout)"

    def _authentication(self, text: str) -> str:
        what = f"SASL {self.mechanism or ''}".rstrip() + (
            f" for user {self.user!r}" if self.user else ""
        )
        m = _SASL.search(_AFTER.sub("", text))
        reason = m.group("reason") if m else _AFTER.sub("", text)
        if _BAD_CREDENTIALS.search(reason):
            return f"authentication failed: {what} (wrong user name or password?)"
        m = _MECHANISMS.search(reason)
        if m and not m["mechanisms"].strip():
            return (
                f"authentication failed: {what}: the listener does not use SASL "
                "(a PLAINTEXT or SSL listener? leave out --user)"
            )
        if m:
            return f"authentication failed: {what}: the listener enables {m['mechanisms']}"
        return f"authentication failed: {what}: {reason}"

    def _connection(self, code: int | None, address: str, text: str) -> str:
        m = _RESOLVE.search(text)
        if m:
            return f"cannot resolve host {m.group('host')!r}"
        m = _REFUSED.search(text)
        if m:
            return f"connection refused by {m.group('address')}: is a broker listening there?"
        if code == KafkaError._TIMED_OUT or _TIMED_OUT.search(text):
            return self.no_answer()
        if _CLOSED.search(text):
            return (
                f"{address} closed the connection: does its listener need SASL "
                "(--user, --password) or TLS (--tls)?"
            )
        return f"{address}: {text}" if address else text
