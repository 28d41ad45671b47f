"""The connection options every broker command takes, as Kafka clients name them, and the
librdkafka (confluent-kafka) configuration they make.

``-b/--brokers`` (or ``LOGSTORE_BROKERS``, default ``127.0.0.1:9092``) lists bootstrap
servers; the security options follow ``security.protocol``, ``sasl.mechanism``,
``sasl.username``/``sasl.password`` and the ``ssl.*`` locations; ``-X key=value`` passes
any other librdkafka property through, as rpk's ``-X`` does. The protocol defaults from
what is given: SASL options make it SASL_PLAINTEXT, TLS options SSL, both SASL_SSL.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

import click

from logstore.cli import profile_store
from logstore.cli.common import CliError
from logstore.cli.output import Output, format_option

DEFAULT_BROKERS = "127.0.0.1:9092"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# librdkafka's own log lines (connection refused ...) are dropped: the command reports
# the error that matters in words. --verbose shows them on stderr.
_librdkafka_log = logging.getLogger("logstore.cli.librdkafka")
_librdkafka_log.addHandler(logging.NullHandler())
_librdkafka_log.propagate = False


@dataclasses.dataclass(frozen=True)
class ClientOptions:
    brokers: str = DEFAULT_BROKERS
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    user: str | None = None
    password: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    extra: tuple[str, ...] = ()
    timeout: float = 10.0
    verbose: bool = False

    def protocol(self) -> str:
        if self.security_protocol:
            return self.security_protocol.upper()
        sasl = bool(self.sasl_mechanism or self.user)
        tls = self.tls or bool(self.tls_ca or self.tls_cert or self.tls_key)
        return {
            (False, False): "PLAINTEXT",
            (False, True): "SSL",
            (True, False): "SASL_PLAINTEXT",
            (True, True): "SASL_SSL",
        }[(sasl, tls)]

    def config(self) -> dict[str, Any]:
        """The librdkafka configuration for these options (CliError for a bad ``-X``)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.brokers,
            "security.protocol": self.protocol(),
            "logger": _verbose_logger() if self.verbose else _librdkafka_log,
        }
        if conf["security.protocol"].startswith("SASL"):
            if not self.user or self.password is None:
                raise CliError("SASL needs --user and --password (or LOGSTORE_SASL_PASSWORD)")
            conf["sasl.mechanism"] = (self.sasl_mechanism or "SCRAM-SHA-256").upper()
            conf["sasl.username"] = self.user
            conf["sasl.password"] = self.password
        if self.tls_ca:
            conf["ssl.ca.location"] = self.tls_ca
        if self.tls_cert:
            conf["ssl.certificate.location"] = self.tls_cert
        if self.tls_key:
            conf["ssl.key.location"] = self.tls_key
        for item in self.extra:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"-X {item!r}: expected KEY=VALUE (a librdkafka property)")
            conf[key.strip()] = value.strip()
        return conf


def _verbose_logger() -> logging.Logger:
    logger = logging.getLogger("logstore.cli.librdkafka.verbose")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("librdkafka: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    return logger


_OPTIONS = [
    click.option(
        "-b",
        "--brokers",
        envvar="LOGSTORE_BROKERS",
        default=DEFAULT_BROKERS,
        show_default=True,
        help="bootstrap servers, host:port[,host:port...] (env LOGSTORE_BROKERS)",
    ),
    click.option(
        "--security-protocol",
        type=click.Choice(SECURITY_PROTOCOLS, case_sensitive=False),
        help="security.protocol (default from the options given)",
    ),
    click.option(
        "--sasl-mechanism",
        type=click.Choice(SASL_MECHANISMS, case_sensitive=False),
        help="sasl.mechanism (default SCRAM-SHA-256 when --user is given)",
    ),
    click.option(
        "--user", envvar="LOGSTORE_SASL_USER", help="SASL user name (env LOGSTORE_SASL_USER)"
    ),
    click.option(
        "--password",
        envvar="LOGSTORE_SASL_PASSWORD",
        help="SASL password (env LOGSTORE_SASL_PASSWORD)",
    ),
    click.option("--tls", is_flag=True, help="connect with TLS"),
    click.option(
        "--tls-ca", type=click.Path(dir_okay=False), help="CA certificates, PEM (ssl.ca.location)"
    ),
    click.option(
        "--tls-cert",
        type=click.Path(dir_okay=False),
        help="client certificate, PEM (ssl.certificate.location)",
    ),
    click.option(
        "--tls-key", type=click.Path(dir_okay=False), help="client key, PEM (ssl.key.location)"
    ),
    click.option(
        "-X",
        "extra",
        multiple=True,
        metavar="KEY=VALUE",
        help="any librdkafka property; repeatable",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=10.0,
        show_default=True,
        help="seconds to wait for the broker's answers",
    ),
    click.option("-v", "--verbose", is_flag=True, help="show librdkafka's log on stderr"),
]


def broker_command(f: Callable[..., Any]) -> Callable[..., Any]:
    """Adds the connection options, ``--profile`` and ``--format`` to a click command; the
    function receives ``client`` (:class:`ClientOptions`, options neither flags nor the
    environment set taken from the profile, see :mod:`profile_store`) and ``out``
    (:class:`Output`)."""
    names = [
        "brokers",
        "security_protocol",
        "sasl_mechanism",
        "user",
        "password",
        "tls",
        "tls_ca",
        "tls_cert",
        "tls_key",
        "extra",
        "timeout",
        "verbose",
    ]

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in names}
        # flags > environment > the profile (--profile, else the current one) > defaults
        profile_store.apply(click.get_current_context(), values, kwargs.pop("profile"))
        client = ClientOptions(**values)
        out = Output(kwargs.pop("fmt"))
        return f(*args, client=client, out=out, **kwargs)

    for option in reversed([*_OPTIONS, profile_store.option, format_option]):
        wrapper = option(wrapper)
    return wrapper
