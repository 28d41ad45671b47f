"""The ``logstore`` command line run as a subprocess against a real broker process.

``cli_broker`` is one broker per test module, with the ACL authorizer on and the
anonymous PLAINTEXT principal a super user (so ACL commands work and nothing is
refused). ``logstore(...)`` runs ``python -m logstore`` with ``LOGSTORE_BROKERS``
pointing at it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.integration.conftest import BrokerProcess
from tests.support.processes import repo_env

AUTHORIZER = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",
    "offsets.topic.num.partitions": "4",
}


class Cli:
    """Runs ``logstore`` subcommands against one bootstrap address."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __call__(
        self, *args: object, input: str | None = None, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        env = repo_env(LOGSTORE_BROKERS=self.bootstrap)
        result = subprocess.run(
            [sys.executable, "-m", "logstore", *map(str, args)],
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            env=env,
        )
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
            assert "Traceback" not in result.stderr, result.stderr
        return result

    def json(self, *args: object, **kwargs: Any) -> Any:
        result = self(*args, "--format", "json", **kwargs)
        return json.loads(result.stdout)

    def lines_json(self, *args: object, **kwargs: Any) -> list[Any]:
        result = self(*args, "--format", "json", **kwargs)
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def table_rows(stdout: str) -> list[list[str]]:
    """The rows of the tables in ``stdout`` (header rows included), split on runs of
    two or more spaces; rule lines and blank lines dropped."""
    rows = []
    for line in stdout.splitlines():
        s = line.strip()
        if not s or set(s) <= set("─━- "):
            continue
        rows.append([c for c in (part.strip() for part in s.split("  ")) if c])
    return rows


def unique(prefix: str) -> str:
    return f"{prefix}-{time.monotonic_ns()}"


@pytest.fixture(scope="session", autouse=True)
def isolated_config_dir(tmp_path_factory: pytest.TempPathFactory):
    """Every command the tests run keeps its profiles (``logstore profile``) in a fresh
    XDG_CONFIG_HOME, so a profile of the developer's never supplies options."""
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("xdg-config"))
    yield
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


@pytest.fixture(scope="module")
def cli_broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    b = BrokerProcess(str(tmp_path_factory.mktemp("cli-broker")), AUTHORIZER)
    b.start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def logstore(cli_broker: BrokerProcess) -> Cli:
    return Cli(cli_broker.bootstrap)
