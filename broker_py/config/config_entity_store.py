"""Where a broker alone keeps the named config resources of one type (CLIENT_METRICS
subscriptions, GROUP configs): ``<first log dir>/__logstore_metadata/<file name>``::

    {"version": 1, "resources": {"<name>": {"<key>": "<value>", ...}, ...}}

A resource with no keys is not kept. (A cluster keeps them in ZooKeeper:
:class:`broker_py.zk.zk_config_entity_store.ZkConfigEntityStore`, same interface.)
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Protocol

from broker_py.utils import metadata_file
from broker_py.utils.metadata_file import METADATA_DIR

Change = Callable[[dict[str, str]], dict[str, str]]
OnChange = Callable[[str, dict[str, str]], None]


class ConfigEntityStore(Protocol):
    """What the owner of one resource type sees of its store, alone or in a cluster."""

    def start(self, on_change: OnChange) -> None: ...

    def names(self) -> list[str]: ...

    def get(self, name: str) -> dict[str, str]: ...

    def update(
        self, name: str, change: Change, validate_only: bool = False
    ) -> Awaitable[None] | None: ...


class LocalConfigEntityStore:
    def __init__(self, log_dir: str, file_name: str) -> None:
        self._path = os.path.join(log_dir, METADATA_DIR, file_name)
        self._resources: dict[str, dict[str, str]] = (
            metadata_file.load(
                self._path,
                lambda doc: {str(k): dict(v) for k, v in doc.get("resources", {}).items()},
            )
            or {}
        )
        self._on_change: OnChange | None = None

    def start(self, on_change: OnChange) -> None:
        """Hands every stored resource to ``on_change(name, configs)``, then each change."""
        self._on_change = on_change
        for name, configs in list(self._resources.items()):
            on_change(name, dict(configs))

    def names(self) -> list[str]:
        return sorted(self._resources)

    def get(self, name: str) -> dict[str, str]:
        return dict(self._resources.get(name, {}))

    def update(self, name: str, change: Change, validate_only: bool = False) -> None:
        """Replaces the resource's configs with ``change(current)``; whatever ``change``
        raises (the new configs refused) leaves everything as it was."""
        configs = change(self.get(name))
        if validate_only:
            return
        if configs:
            self._resources[name] = dict(configs)
        else:
            self._resources.pop(name, None)
        metadata_file.write(self._path, {"version": 1, "resources": self._resources})
        if self._on_change is not None:
            self._on_change(name, dict(configs))
