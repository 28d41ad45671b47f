"""The connection options every broker command takes, as Kafka clients name them, and the
librdkafka (confluent-kafka) configuration they make.

``-b/--brokers`` (or ``LOGSTORE_BROKERS``, default ``127.0.0.1:9092``) lists bootstrap
servers; the security options follow ``security.protocol``, ``sasl.mechanism``,
``sasl.username``/``sasl.password`` and the ``ssl.*`` locations; ``-X key=value`` passes
any other librdkafka property through, as rpk's ``-X`` does, and takes rpk's own ``-X``
keys for the options (:data:`RPK_KEYS`: ``brokers``, ``user``, ``pass``,
``sasl.mechanism``, ``tls.enabled``, ``tls.ca``, ``tls.cert``, ``tls.key``); a key
librdkafka does not know is refused with the nearest one named
(:func:`client_config_error`). The protocol defaults from what is given: SASL options
make it SASL_PLAINTEXT, TLS options SSL, both SASL_SSL.

Every librdkafka client made from one :class:`ClientOptions` reports its errors and log
lines to its :attr:`ClientOptions.log` (:mod:`logstore.cli.client_log`), which names the
cause when no broker answers; ``-v`` also prints them on stderr.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any

import click
from confluent_kafka import KafkaError, KafkaException

from logstore.cli import librdkafka_properties, profile_store
from logstore.cli.client_log import VERBOSE_DEBUG, ClientLog
from logstore.cli.common import CliError
from logstore.cli.output import Output, format_option

DEFAULT_BROKERS = "127.0.0.1:9092"
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

# rpk's -X keys -> the ClientOptions field each sets.
RPK_KEYS = {
    "brokers": "brokers",
    "user": "user",
    "pass": "password",
    "sasl.mechanism": "sasl_mechanism",
    "tls.enabled": "tls",
    "tls.ca": "tls_ca",
    "tls.cert": "tls_cert",
    "tls.key": "tls_key",
}
_NO_SUCH_PROPERTY = re.compile(r'^No such configuration property: "(.+)"')


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

    @functools.cached_property
    def log(self) -> ClientLog:
        """Where this command's librdkafka clients report (one per ClientOptions)."""
        return ClientLog(verbose=self.verbose)

    def config(self) -> dict[str, Any]:
        """The librdkafka configuration for these options (CliError for a bad ``-X``)."""
        options, extra = self._rpk_keys()
        conf: dict[str, Any] = {
            "bootstrap.servers": options.brokers,
            "security.protocol": options.protocol(),
            **self.log.settings(),
        }
        if self.verbose:
            conf["debug"] = VERBOSE_DEBUG
        if conf["security.protocol"].startswith("SASL"):
            if not options.user or options.password is None:
                raise CliError("SASL needs --user and --password (or LOGSTORE_SASL_PASSWORD)")
            conf["sasl.mechanism"] = (options.sasl_mechanism or "SCRAM-SHA-256").upper()
            conf["sasl.username"] = options.user
            conf["sasl.password"] = options.password
        if options.tls_ca:
            conf["ssl.ca.location"] = options.tls_ca
        if options.tls_cert:
            conf["ssl.certificate.location"] = options.tls_cert
        if options.tls_key:
            conf["ssl.key.location"] = options.tls_key
        conf.update(extra)
        log = self.log
        log.brokers = str(conf["bootstrap.servers"])
        log.timeout = self.timeout
        sasl = str(conf["security.protocol"]).upper().startswith("SASL")
        log.mechanism = (
            str(conf.get("sasl.mechanism", conf.get("sasl.mechanisms"))) if sasl else None
        )
        log.user = str(conf["sasl.username"]) if sasl and "sasl.username" in conf else None
        return conf

    def _rpk_keys(self) -> tuple[ClientOptions, dict[str, str]]:
        """These options with rpk's ``-X`` keys applied, and the other ``-X`` properties."""
        fields: dict[str, Any] = {}
        extra: dict[str, str] = {}
        for item in self.extra:
            key, sep, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not key:
                raise CliError(f"-X {item!r}: expected KEY=VALUE (a librdkafka property)")
            if key not in RPK_KEYS:
                extra[key] = value
            elif key == "tls.enabled":
                if value.lower() not in ("true", "false"):
                    raise CliError(f"-X {item!r}: tls.enabled is true or false")
                fields["tls"] = value.lower() == "true"
            elif key == "sasl.mechanism":
                if value.upper() not in SASL_MECHANISMS:
                    extra[key] = value  # OAUTHBEARER, GSSAPI: librdkafka's to judge
                else:
                    fields["sasl_mechanism"] = value
            else:
                fields[RPK_KEYS[key]] = value
        return dataclasses.replace(self, **fields) if fields else self, extra


def client_config_error(exc: KafkaException) -> CliError:
    """The message for a configuration librdkafka refused: the property named, with the
    nearest known one for a name it does not know (``-X brokerz=...``)."""
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    text = err.str() if err is not None else str(exc)
    message = f"client configuration: {text}"
    m = _NO_SUCH_PROPERTY.search(text)
    if m:
        near = librdkafka_properties.nearest(m.group(1), tuple(RPK_KEYS))
        message += f" (did you mean -X {near}?)" if near else " (see librdkafka's CONFIGURATION.md)"
    return CliError(message)


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
    names = [*profile_store.FIELDS, "verbose"]

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
