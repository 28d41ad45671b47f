"""The SASL authenticator each new connection of a listener gets (Kafka's
``ChannelBuilders`` for SASL): mechanisms, JAAS configs and re-authentication lifetimes
read from the broker's config per listener, once, when the listener starts.

A listener whose mechanisms or JAAS config are not usable stops startup (or a dynamic
listener change) with a ConfigError naming the key.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_py.config.kafka_config import UNSECURED_VALIDATOR, BrokerConfig, ConfigError
from broker_py.security.sasl import jaas
from broker_py.security.sasl.oauthbearer_sasl_server import (
    OAuthBearerSaslServer,
    UnsecuredValidatorOptions,
)
from broker_py.security.sasl.plain_sasl_server import PlainSaslServer
from broker_py.security.sasl.sasl_authenticator import SaslServerAuthenticator
from broker_py.security.sasl.scram_credentials import ScramCredentialStore
from broker_py.security.sasl.scram_sasl_server import ScramSaslServer


def authenticators(
    config: BrokerConfig, listener_name: str, scram_credentials: ScramCredentialStore
) -> Callable[[], SaslServerAuthenticator] | None:
    """A factory of authenticators for a SASL listener; None for any other."""
    if config.security_protocol(listener_name) not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return None
    mechanisms = config.sasl_mechanisms(listener_name)
    plain_users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        key, raw = config.jaas_config(listener_name, "PLAIN")
        module = jaas.parse(key, raw) if raw else None
        if module is None or not module.class_name.endswith(".PlainLoginModule"):
            raise ConfigError(
                key,
                "(hidden)" if raw else "",
                'PLAIN needs a PlainLoginModule config with user_<name>="<password>" options',
            )
        plain_users = {
            k[len("user_") :]: v for k, v in module.options.items() if k.startswith("user_")
        }
    oauth = _oauthbearer_options(config, listener_name) if "OAUTHBEARER" in mechanisms else None
    reauth_ms = {m: _max_reauth_ms(config, listener_name, m) for m in mechanisms}

    def new_server(mechanism: str):
        if mechanism == "PLAIN":
            return PlainSaslServer(plain_users)
        if mechanism == "OAUTHBEARER":
            assert oauth is not None
            return OAuthBearerSaslServer(oauth)
        return ScramSaslServer(mechanism, scram_credentials)

    return lambda: SaslServerAuthenticator(mechanisms, new_server, reauth_ms.__getitem__)


def _max_reauth_ms(config: BrokerConfig, listener_name: str, mechanism: str) -> int:
    """``connections.max.reauth.ms`` for a mechanism on a listener, from Kafka's
    ``listener.name.<listener>.<mechanism>.connections.max.reauth.ms`` or the broker
    key; ConfigError naming the key unless it is an integer of at least 0."""
    key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.connections.max.reauth.ms"
    raw = config.listener_value(listener_name, f"{mechanism.lower()}.connections.max.reauth.ms")[1]
    if raw is None:
        return config["connections.max.reauth.ms"]
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "not an integer") from None
    if value < 0:
        raise ConfigError(key, raw, "must be at least 0")
    return value


def _oauthbearer_options(config: BrokerConfig, listener_name: str) -> UnsecuredValidatorOptions:
    """The unsecured validator's options from the listener's OAuthBearerLoginModule
    config; ConfigError naming the key for a missing module, a bad option or a
    server callback handler other than the unsecured validator (JWKS validation
    is not served)."""
    key, handler = config.listener_value(
        listener_name, "oauthbearer.sasl.server.callback.handler.class"
    )
    if handler is not None and handler.strip() not in ("", UNSECURED_VALIDATOR):
        raise ConfigError(key, handler, f"only {UNSECURED_VALIDATOR} (unsecured JWTs) is served")
    key, raw = config.jaas_config(listener_name, "OAUTHBEARER")
    module = jaas.parse(key, raw) if raw else None
    if module is None or not module.class_name.endswith(".OAuthBearerLoginModule"):
        raise ConfigError(
            key, "(hidden)" if raw else "", "OAUTHBEARER needs an OAuthBearerLoginModule config"
        )
    try:
        return UnsecuredValidatorOptions.from_jaas_options(module.options)
    except ValueError as e:
        raise ConfigError(key, "(hidden)", str(e)) from None
