"""The TLS context a broker connects to other brokers with (Kafka's inter-broker SSL
client: the ``ssl.*`` keys, or ``listener.name.<inter-broker listener>.ssl.*``, read
as the client side of an SslFactory).

- Truststore (the CAs the other broker's certificate must chain to):
  ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or
  ``ssl.truststore.certificates``) or PKCS12; the system's CAs when none is set.
- Keystore, when one is set (same keys and types as the listener's, see
  ``ssl_context.py``): presented as the client certificate, so a listener with
  ``ssl.client.auth=required`` accepts its peers.
- ``ssl.endpoint.identification.algorithm``: ``https`` (Kafka's default) checks the
  peer's certificate against the host connected to; empty turns the check off.
- ``ssl.enabled.protocols`` bounds the TLS versions.

Every problem is a ConfigError naming the key.
"""

from __future__ import annotations

import ssl

from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.security.ssl.ssl_context import _VERSIONS, _load_keystore, _load_truststore


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    def value(key: str) -> tuple[str, str | None]:
        return config.listener_value(listener, key)

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    key, raw = value("ssl.enabled.protocols")
    versions = [p.strip() for p in (raw or "").split(",") if p.strip()]
    if not versions or any(p not in _VERSIONS for p in versions):
        raise ConfigError(key, raw or "", f"must list protocols among {', '.join(_VERSIONS)}")
    ctx.minimum_version = min(_VERSIONS[p] for p in versions)
    ctx.maximum_version = max(_VERSIONS[p] for p in versions)
    key, raw = value("ssl.endpoint.identification.algorithm")
    algorithm = (raw or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(key, raw, "must be https or empty")
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if value("ssl.truststore.location")[1] or value("ssl.truststore.certificates")[1]:
        _load_truststore(ctx, listener, value)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if value("ssl.keystore.location")[1] or value("ssl.keystore.key")[1]:
        _load_keystore(ctx, listener, value)
    return ctx
