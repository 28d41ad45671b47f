"""``logstore profile`` against a real broker: a profile created with ``-b`` is what a
broker command without ``-b`` (and without ``$LOGSTORE_BROKERS``) connects with; flags
and the environment win over it, ``--profile`` picks another for one command; the file
lives under ``$XDG_CONFIG_HOME/logstore`` with mode 0600 after every update, and
``show`` masks the password."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import table_rows, unique
from tests.support.ports import free_port
from tests.support.processes import repo_env


class Logstore:
    """``python -m logstore`` with its own config dir and no LOGSTORE_* variables."""

    def __init__(self, config_home: Path) -> None:
        self.config_home = config_home
        self.file = config_home / "logstore" / "profiles.json"

    def __call__(
        self, *args: object, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in repo_env().items() if not k.startswith("LOGSTORE_")}
        result = subprocess.run(
            [sys.executable, "-m", "logstore", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**base, "XDG_CONFIG_HOME": str(self.config_home), **env},
        )
        assert "Traceback" not in result.stderr, result.stderr
        if check:
            assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def mode(self) -> int:
        return stat.S_IMODE(os.stat(self.file).st_mode)


@pytest.fixture
def logstore(tmp_path: Path) -> Logstore:
    return Logstore(tmp_path / "config")


def test_a_profile_is_what_broker_commands_connect_with(cli_broker, logstore) -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    created = logstore("profile", "create", "local", "-b", cli_broker.bootstrap, "--timeout", "5")
    assert "Created profile local (brokers, timeout)" in created.stdout
    assert logstore.mode() == 0o600
    assert stat.S_IMODE(os.stat(logstore.file.parent).st_mode) == 0o700
    assert json.loads(logstore.file.read_text()) == {
        "current": "local",
        "profiles": {"local": {"brokers": cli_broker.bootstrap, "timeout": 5.0}},
    }

    topic = unique("profiled")
    logstore("topic", "create", topic)  # no -b, no $LOGSTORE_BROKERS: the profile's broker
    assert topic in [
        t["name"] for t in json.loads(logstore("topic", "list", "--format", "json").stdout)
    ]

    # A flag, then the environment, win over the profile.
    flag = logstore("topic", "list", "-b", nowhere, "--timeout", "1", check=False)
    assert flag.returncode == 2 and nowhere in flag.stderr, flag.stderr
    env = logstore("topic", "list", "--timeout", "1", check=False, LOGSTORE_BROKERS=nowhere)
    assert env.returncode == 2 and nowhere in env.stderr, env.stderr

    # A second profile becomes current; --profile and `use` switch back.
    logstore("profile", "create", "gone", "-b", nowhere, "--timeout", "1")
    assert logstore.mode() == 0o600
    rows = table_rows(logstore("profile", "list").stdout)
    assert rows[1:] == [["gone*", nowhere, "-"], ["local", cli_broker.bootstrap, "-"]]
    gone = logstore("topic", "list", check=False)
    assert gone.returncode == 2 and nowhere in gone.stderr, gone.stderr
    logstore("topic", "describe", topic, "--profile", "local")
    logstore("topic", "describe", topic, LOGSTORE_PROFILE="local")
    logstore("topic", "describe", topic, "-b", cli_broker.bootstrap, "--timeout", "5")
    assert "Using profile local." in logstore("profile", "use", "local").stdout
    assert logstore.mode() == 0o600
    logstore("topic", "describe", topic)

    unknown = logstore("topic", "list", "--profile", "nope", check=False)
    assert unknown.returncode == 2 and "no profile named 'nope'" in unknown.stderr


def test_show_masks_the_password_and_delete_clears_current(logstore) -> None:
    logstore(
        "profile",
        "create",
        "secure",
        "-b",
        "k1:9093,k2:9093",
        "--user",
        "alice",
        "--password",
        "alice-secret",
        "--sasl-mechanism",
        "SCRAM-SHA-512",
        "--tls-ca",
        "ca.pem",
        "-X",
        "client.id=ops",
    )
    assert logstore.mode() == 0o600
    shown = logstore("profile", "show")
    assert "alice-secret" not in shown.stdout
    rows = table_rows(shown.stdout)
    assert ["PASSWORD", "********"] in rows and ["USER", "alice"] in rows
    data = json.loads(logstore("profile", "show", "secure", "--format", "json").stdout)
    assert data["password"] == "********" and data["current"] is True
    assert data["sasl_mechanism"] == "SCRAM-SHA-512" and data["extra"] == ["client.id=ops"]
    assert os.path.isabs(data["tls_ca"]) and data["tls_ca"].endswith("ca.pem")

    again = logstore("profile", "create", "secure", check=False)
    assert again.returncode == 2 and "exists" in again.stderr
    assert "Deleted profile secure." in logstore("profile", "delete", "secure").stdout
    assert logstore.mode() == 0o600
    assert json.loads(logstore("profile", "list", "--format", "json").stdout) == []
    none = logstore("profile", "show", check=False)
    assert none.returncode == 2 and "no profile is current" in none.stderr
