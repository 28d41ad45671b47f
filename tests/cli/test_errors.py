"""Errors that name their cause: a refused connection, a host that does not resolve, a
broker that never answers, a wrong SASL password (and the broker's log of it), a listener
that needs SASL, ``-v``, rpk's ``-X`` keys and a mistyped one, ``export`` without the
spark extra, and Ctrl-C at a prompt. Every command runs as ``python -m logstore`` against
real processes: one broker with a PLAINTEXT and a SASL_PLAINTEXT listener for the module."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys

import pytest

from tests.cli.conftest import Cli, unique
from tests.integration.conftest import BrokerProcess
from tests.support.ports import free_port
from tests.support.processes import repo_env
from tests.support.waiting import wait_until

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)
# A command that fails to connect waits this long (its --timeout).
FAIL_FAST = ("--timeout", "1")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> BrokerProcess:
    b = BrokerProcess(str(tmp_path_factory.mktemp("errors")))
    b.sasl_port = free_port()  # type: ignore[attr-defined]
    b.overrides.update(
        {
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"  # type: ignore[attr-defined]
            ),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
    )
    b.start()
    yield b
    b.kill()


@pytest.fixture(scope="module")
def logstore(broker: BrokerProcess) -> Cli:
    cli = Cli(broker.bootstrap)
    cli("user", "create", "alice", "--new-password", "alice-scram-secret")
    return cli


def sasl(broker: BrokerProcess) -> str:
    return f"127.0.0.1:{broker.sasl_port}"  # type: ignore[attr-defined]


def command(args: tuple[str, ...]) -> str:
    """The command's name in its error line: ``topic list``, ``produce``..."""
    return " ".join(args[:2]) if args[0] == "topic" else args[0]


def failing(logstore: Cli, *args: object, input: str | None = None) -> str:
    """The one error line of a command that must exit 2."""
    r = logstore(*args, input=input, check=False)
    assert r.returncode == 2, (args, r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ("topic", "list"),
        ("produce", "t", "--value", "v"),
        ("consume", "t", "-n", "1"),
    ],
    ids=["admin", "produce", "consume"],
)
def test_a_wrong_password_says_authentication_failed_and_the_broker_logs_it(
    logstore: Cli, broker: BrokerProcess, args: tuple[str, ...]
) -> None:
    password = unique("wrong-password")
    # A refused authentication ends the command at once: with --timeout 300 it would
    # otherwise outlast the 120 s the test gives it (subprocess.TimeoutExpired).
    line = failing(
        logstore,
        *args,
        "-b",
        sasl(broker),
        "--user",
        "alice",
        "--password",
        password,
        "--timeout",
        "300",
    )
    assert line == (
        f"logstore {command(args)}: error: authentication failed: SASL SCRAM-SHA-256 for user "
        "'alice' (wrong user name or password?)"
    )
    # At INFO, with the listener, mechanism and user; never the password.
    wait_until(
        lambda: (
            "INFO broker_py.network.socket_server: Failed authentication with /127.0.0.1 "
            in broker.log_text()
        ),
        message="the broker's log of the failed authentication",
    )
    logged = [line for line in broker.log_text().splitlines() if "Failed authentication" in line]
    assert any(
        "listener SASL_PLAINTEXT, mechanism SCRAM-SHA-256, user 'alice')" in line
        and "invalid credentials with SASL mechanism SCRAM-SHA-256" in line
        for line in logged
    ), logged
    assert password not in broker.log_text()


def test_a_wrong_plain_password_names_plain(logstore: Cli, broker: BrokerProcess) -> None:
    line = failing(
        logstore,
        "group",
        "list",
        "-b",
        sasl(broker),
        "--user",
        "alice",
        "--password",
        "not-alice-secret",
        "--sasl-mechanism",
        "PLAIN",
        *FAIL_FAST,
    )
    assert line == (
        "logstore group list: error: authentication failed: SASL PLAIN for user 'alice' "
        "(wrong user name or password?)"
    )
    assert "not-alice-secret" not in broker.log_text()


def test_the_right_password_works_and_rpk_x_keys_set_the_options(
    logstore: Cli, broker: BrokerProcess
) -> None:
    topic = unique("rpk-x")
    rpk = ["-X", f"brokers={sasl(broker)}", "-X", "user=alice", "-X", "pass=alice-scram-secret"]
    r = logstore("produce", topic, "--value", "v1", *rpk, "-X", "sasl.mechanism=SCRAM-SHA-256")
    assert "offset 0" in r.stdout
    r = logstore("consume", topic, "-n", "1", "-b", "127.0.0.1:1", *rpk)  # -X brokers wins
    assert r.stdout == "v1\n"


def test_a_client_without_sasl_on_a_sasl_listener(logstore: Cli, broker: BrokerProcess) -> None:
    line = failing(logstore, "topic", "list", "-b", sasl(broker), *FAIL_FAST)
    assert line == (
        f"logstore topic list: error: {sasl(broker)} closed the connection: does its listener "
        "need SASL (--user, --password) or TLS (--tls)?"
    )
    wait_until(
        lambda: (
            "Metadata request before SASL authentication on listener SASL_PLAINTEXT"
            in broker.log_text()
        ),
        message="the broker's warning about the unauthenticated request",
    )


def test_sasl_on_a_plaintext_listener(logstore: Cli) -> None:
    line = failing(logstore, "topic", "list", "--user", "alice", "--password", "x", *FAIL_FAST)
    assert line == (
        "logstore topic list: error: authentication failed: SASL SCRAM-SHA-256 for user "
        "'alice': the listener does not use SASL (a PLAINTEXT or SSL listener? leave out --user)"
    )


@pytest.mark.parametrize(
    "args",
    [("topic", "list"), ("produce", "t", "--value", "v"), ("consume", "t", "-n", "1")],
    ids=["admin", "produce", "consume"],
)
def test_a_closed_port_is_a_refused_connection(logstore: Cli, args: tuple[str, ...]) -> None:
    port = free_port()
    line = failing(logstore, *args, "-b", f"127.0.0.1:{port}", *FAIL_FAST)
    assert line == (
        f"logstore {command(args)}: error: connection refused by 127.0.0.1:{port}: "
        "is a broker listening there?"
    )


def test_a_host_that_does_not_resolve(logstore: Cli) -> None:
    line = failing(logstore, "cluster", "info", "-b", "nohost.invalid:9092", *FAIL_FAST)
    assert line == "logstore cluster info: error: cannot resolve host 'nohost.invalid'"


def test_two_brokers_failing_differently_are_both_named(logstore: Cli) -> None:
    port = free_port()
    line = failing(logstore, "topic", "list", "-b", f"nohost.invalid,127.0.0.1:{port}", *FAIL_FAST)
    assert "cannot resolve host 'nohost.invalid'" in line
    assert f"connection refused by 127.0.0.1:{port}: is a broker listening there?" in line


def test_a_server_that_never_answers_is_a_timeout(logstore: Cli) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        line = failing(logstore, "topic", "list", "-b", f"127.0.0.1:{port}", *FAIL_FAST)
    assert (
        line == f"logstore topic list: error: no answer from 127.0.0.1:{port} within 1s (--timeout)"
    )


def test_verbose_shows_librdkafkas_log_for_admin_commands(logstore: Cli) -> None:
    r = logstore("topic", "list", "-v")
    lines = r.stderr.splitlines()
    assert lines and all(line.startswith("librdkafka: ") for line in lines), r.stderr
    assert any("Connected to ipv4#" in line for line in lines), r.stderr
    port = free_port()
    r = logstore("cluster", "info", "-v", "-b", f"127.0.0.1:{port}", *FAIL_FAST, check=False)
    assert r.returncode == 2
    assert "librdkafka: FAIL [rdkafka#producer-1]" in r.stderr
    assert f"Connect to ipv4#127.0.0.1:{port} failed: Connection refused" in r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        f"logstore cluster info: error: connection refused by 127.0.0.1:{port}: "
        "is a broker listening there?"
    )


def test_a_mistyped_x_key_names_the_nearest(logstore: Cli) -> None:
    line = failing(logstore, "topic", "list", "-X", "brokerz=127.0.0.1:9092")
    assert line == (
        "logstore topic list: error: client configuration: No such configuration property: "
        '"brokerz" (did you mean -X brokers?)'
    )
    line = failing(logstore, "produce", "t", "--value", "v", "-X", "ssl.ca.locaton=/x")
    assert line.endswith('"ssl.ca.locaton" (did you mean -X ssl.ca.location?)'), line
    line = failing(logstore, "topic", "list", "-X", "tls.enabled=maybe")
    assert (
        line == "logstore topic list: error: -X 'tls.enabled=maybe': tls.enabled is true or false"
    )


def test_export_without_the_spark_extra(tmp_path: pytest.TempPathFactory) -> None:
    """pyspark hidden by a sitecustomize that refuses to import it."""
    hide = tmp_path / "hide-pyspark"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'pyspark':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Hide())\n"
    )
    env = repo_env()
    env["PYTHONPATH"] = os.pathsep.join([str(hide), env["PYTHONPATH"]])
    r = subprocess.run(
        [sys.executable, "-m", "logstore", "export", "--out", str(tmp_path / "out"), "x"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr == (
        "logstore export: error: needs the spark extra (pyspark is not installed): "
        "pip install '.[spark]' from a logstore checkout\n"
    )


def test_ctrl_c_at_a_prompt_is_exit_status_130(broker: BrokerProcess) -> None:
    """``user create`` asks for the password; SIGINT while it waits (a new session: no
    terminal, so the prompt reads stdin)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "logstore", "user", "create", "bob", "-b", broker.bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=repo_env(),
        start_new_session=True,
    )
    seen = b""

    def prompted() -> bool:
        nonlocal seen
        ready, _, _ = select.select([proc.stdout, proc.stderr], [], [], 0.2)
        for stream in ready:
            seen += os.read(stream.fileno(), 4096)
        return b"New password:" in seen

    try:
        wait_until(prompted, timeout=60, message="the password prompt")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "logstore: aborted"
