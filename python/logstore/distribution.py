"""The installed distribution's version (``pyproject.toml``'s ``version``): what the CLI,
``logstore-broker --version`` and the clients' ApiVersions software version report. A
source tree that was never installed says ``unknown``."""

from __future__ import annotations

import functools
from importlib import metadata

DISTRIBUTION = "logstore"


@functools.cache
def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
