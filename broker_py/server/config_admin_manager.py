"""Config administration (Kafka's ``ConfigAdminManager`` and the config half of
``ZkAdminManager``): the writes behind AlterConfigs and IncrementalAlterConfigs.

- A TOPIC resource's configs are validated as Kafka validates them (the engine's table of
  topic configs, over the broker's defaults), then written to the store by whichever
  broker is asked; every broker applies them to its logs when notified
  (:class:`~broker_py.server.log_config_manager.LogConfigManager`). A bad value is
  answered as Kafka's ZooKeeper mode answers a ConfigException: INVALID_CONFIG with
  ``Invalid config value for resource ConfigResource(type=TOPIC, name='<topic>'): `` before
  the message; an unknown name or a cross-key rule with the message alone.
- A BROKER resource (``""``: the cluster default, or this broker's id) replaces the
  dynamic configs layered over the static ones. The new layers are checked before they
  stay: the topic defaults among them as a topic sees them, and the listeners they name
  (:class:`~broker_py.server.dynamic_listener_config.DynamicListenerConfig`: a new address
  is bound before the change is accepted). A refused key or value is answered as Kafka
  answers it (:func:`broker_config_error`). Once accepted, listeners start and stop, and
  every partition whose topic does not set its own value takes the new defaults.

A store write the disk refuses (KafkaStorageError naming the file) changes nothing.
"""

from __future__ import annotations

import asyncio
import logging

from broker_py.config.dynamic_broker_config import DynamicBrokerConfigStore
from broker_py.config.kafka_config import BrokerConfig, ConfigError
from broker_py.server.dynamic_listener_config import DynamicListenerConfig, ListenerChanges
from broker_py.server.log_config_manager import LogConfigManager, TopicConfigError
from logstore.protocol.errors import InvalidConfigError, InvalidRequestError

log = logging.getLogger(__name__)


def config_resource(resource_type: str, name: str) -> str:
    """Kafka's ``ConfigResource.toString``, as its error messages name a resource."""
    return f"ConfigResource(type={resource_type}, name='{name}')"


def broker_config_error(resource: str, e: ConfigError) -> InvalidConfigError:
    """INVALID_CONFIG for a BROKER resource's refused configs, as Kafka's ZooKeeper mode
    answers a ConfigException: ``Invalid config value for resource ConfigResource(type=BROKER,
    name='<id>'): <message>``."""
    return InvalidConfigError(
        f"Invalid config value for resource {config_resource('BROKER', resource)}: {e}"
    )


class ConfigAdminManager:
    def __init__(
        self,
        config: BrokerConfig,
        dynamic_configs: DynamicBrokerConfigStore,
        log_configs: LogConfigManager,
        listener_config: DynamicListenerConfig,
        support,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self._dynamic_configs = dynamic_configs
        self._log_configs = log_configs
        self._listener_config = listener_config
        self.support = support  # LocalSupport or ZkSupport

    def set_topic_configs(self, name: str, configs: dict[str, str], validate_only: bool = False):
        """Validates now and writes the topic's configs to the store: at once on a broker
        alone (None returned), else returned as the write to await."""
        try:
            self._log_configs.validate_topic_configs(configs)
        except TopicConfigError as e:
            if not e.config_exception:
                raise
            raise InvalidConfigError(
                f"Invalid config value for resource {config_resource('TOPIC', name)}: {e}"
            ) from None
        if validate_only:
            return None
        if self.support.local:
            self.support.store.set_topic_configs(name, dict(configs))
            return None
        return asyncio.to_thread(self.support.store.set_topic_configs, name, dict(configs))

    def set_broker_configs(
        self, resource: str, configs: dict[str, str], validate_only: bool = False
    ) -> None:
        """Replaces the dynamic configs of BROKER resource ``resource`` (``""``: the
        cluster default, or this broker's id). Topic defaults among them apply at once
        to every partition whose topic does not set its own; listeners added or removed
        start or stop listening (a new address is bound before the change is accepted)."""
        if resource not in ("", str(self.broker_id)):
            raise InvalidRequestError(
                f"broker {resource!r} is not this broker ({self.broker_id}) or the default ('')"
            )
        listeners = ListenerChanges()

        def check() -> None:
            self._log_configs.validate_topic_configs({})  # the new topic defaults
            self._listener_config.validate_reconfiguration(listeners)

        try:
            try:
                self._dynamic_configs.set(resource, configs, check, validate_only=validate_only)
            except BaseException:
                self._listener_config.abandon(listeners)
                raise
        except ConfigError as e:
            raise broker_config_error(resource, e) from None
        if validate_only:
            self._listener_config.abandon(listeners)
            return
        self._listener_config.reconfigure(listeners)
        self._log_configs.broker_defaults_changed()
        log.info("dynamic configs of broker resource %r are now %s", resource, configs)
