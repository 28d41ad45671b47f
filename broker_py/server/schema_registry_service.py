"""The schema registry inside the broker: started on the broker's event loop when
`schema.registry.listeners` is set (off by default), as Redpanda embeds one.

Its Kafka clients (the `_schemas` producer and reader, the election's group client) connect to
this broker's first advertised PLAINTEXT listener, or SSL listener with the broker's own
ssl.* truststore; a broker with neither cannot run the registry (ConfigError at startup).
`https://` serves TLS with the broker's ssl.* keystore (listener-prefixed keys under the
listener name SCHEMA_REGISTRY). `schema.registry.authentication=basic` checks HTTP basic
credentials against the broker's SCRAM users. The registry's series join the broker's
metrics endpoint when `metrics.port` is set.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from broker_py.config.config_def import ConfigError

if TYPE_CHECKING:
    from broker_py.config.kafka_config import BrokerConfig
    from broker_py.security.sasl.scram_credentials import ScramCredentialStore
    from logstore.schema_registry.server import RegistryServer

log = logging.getLogger(__name__)

LISTENER_NAME = "SCHEMA_REGISTRY"


def _client_config(config: BrokerConfig) -> tuple[dict[str, Any], Any]:
    """confluent-kafka's config reaching this broker, and the election's TLS context.

    The first of this broker's advertised listeners by protocol: PLAINTEXT, SSL,
    SASL_PLAINTEXT, SASL_SSL. On a SASL listener the registry (its producer, consumer and
    election client) authenticates as the broker does to that listener of other brokers:
    `sasl.mechanism.inter.broker.protocol` when the listener enables it, else the first of
    its `sasl.enabled.mechanisms` that is PLAIN or SCRAM, with the username and password of
    the listener's JAAS config for that mechanism."""
    listeners = config["advertised.listeners"]
    for wanted in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        for listener in listeners:
            if config.security_protocol(listener.name) != wanted:
                continue
            host = listener.host or "127.0.0.1"
            conf: dict[str, Any] = {"bootstrap.servers": f"{host}:{listener.port}"}
            if wanted != "PLAINTEXT":
                conf["security.protocol"] = wanted
            if wanted.startswith("SASL"):
                conf.update(_sasl_config(config, listener.name))
            tls = None
            if wanted.endswith("SSL"):
                from broker_py.security.ssl.ssl_client_context import client_context

                _, ca = config.listener_value(listener.name, "ssl.truststore.location")
                if ca:
                    conf["ssl.ca.location"] = ca
                tls = client_context(config, listener.name)
            return conf, tls
    raise ConfigError(
        "schema.registry.listeners",
        str(config["schema.registry.listeners"]),
        "the schema registry needs a listener on this broker",
    )


def _sasl_config(config: BrokerConfig, listener_name: str) -> dict[str, str]:
    from broker_py.security.sasl.sasl_client import CLIENT_MECHANISMS, inter_broker_credentials

    enabled = config.sasl_mechanisms(listener_name)
    preferred = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
    usable = [m for m in enabled if m in CLIENT_MECHANISMS]
    if not usable:
        raise ConfigError(
            "schema.registry.listeners",
            str(config["schema.registry.listeners"]),
            f"listener {listener_name} enables no mechanism the registry speaks "
            f"({', '.join(CLIENT_MECHANISMS)})",
        )
    mechanism = preferred if preferred in usable else usable[0]
    username, password = inter_broker_credentials(config, listener_name, mechanism)
    return {"sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password}


def build(
    config: BrokerConfig, scram: ScramCredentialStore, metrics_registry: Any
) -> RegistryServer | None:
    listener = config["schema.registry.listeners"]
    if listener is None:
        return None
    from logstore.schema_registry.auth import BasicAuthenticator, ScramCredential
    from logstore.schema_registry.server import RegistryConfig, RegistryServer

    client_config, kafka_tls = _client_config(config)
    server_tls = forward_tls = None
    if listener.startswith("https://"):
        import ssl

        from broker_py.security.ssl.ssl_context import server_context

        server_tls = server_context(config, LISTENER_NAME)
        # the other brokers' registries present certificates the broker's truststore trusts
        _, ca = config.listener_value(LISTENER_NAME, "ssl.truststore.location")
        forward_tls = ssl.create_default_context(cafile=ca) if ca else None
    authenticator = None
    if config["schema.registry.authentication"] == "basic":

        def credentials(user: str) -> list[ScramCredential]:
            out = []
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                c = scram.get(user, mechanism)
                if c is not None:
                    out.append(ScramCredential(mechanism, c.salt, c.iterations, c.stored_key))
            return out

        authenticator = BasicAuthenticator(credentials, time.monotonic)
    advertised = config["schema.registry.advertised.host"]
    if advertised is None:
        host = config.advertised_listener().host
        advertised = host or None
    return RegistryServer(
        RegistryConfig(
            listener=listener,
            client_config={**client_config, "client.id": f"schema-registry-{config.broker_id}"},
            advertised_host=advertised,
            server_tls=server_tls,
            kafka_tls=kafka_tls,
            forward_tls=forward_tls,
            authenticator=authenticator,
            metrics_registry=metrics_registry,
            max_body=config["schema.registry.max.request.bytes"],
            session_timeout_ms=config["schema.registry.session.timeout.ms"],
            # a broker alone holds one replica; a cluster's _schemas waits for its brokers
            replication_factor=(
                config["schema.registry.topic.replication.factor"]
                if config["zookeeper.connect"] is not None
                else 1
            ),
        )
    )
