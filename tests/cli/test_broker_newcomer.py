"""What a newcomer meets starting ``logstore-broker``: --version, plain messages for a
port in use, an unwritable data dir, a missing properties file, every bad value at
once, timestamps on the banner, and --log-format json."""

from __future__ import annotations

import json
import re
import socket
import subprocess
from pathlib import Path

from tests.support.ports import free_port
from tests.support.processes import broker_command, repo_env

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ")


def broker(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = repo_env()
    return subprocess.run(
        broker_command(*args),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
    )


def test_missing_properties_file(tmp_path: Path) -> None:
    result = broker(str(tmp_path / "server.properties"), cwd=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == f"logstore-broker: properties file {tmp_path / 'server.properties'}: no such file"
    )


def test_every_bad_value_at_once(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text(
        "num.partitions=many\nlog.retention.ms=soon\nlisteners=PLAINTEXT://127.0.0.1:9092\n"
    )
    result = broker(
        str(props), "--override", "min.insync.replicas=0", "--override", "oops", cwd=tmp_path
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "4 invalid configuration values" in result.stderr
    for key in ("num.partitions", "log.retention.ms", "min.insync.replicas", "--override"):
        assert f"configuration {key}:" in result.stderr, key


def test_unwritable_data_dir_names_log_dirs(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = broker(
        "--override",
        f"log.dirs={blocker / 'data'}",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert "configuration log.dirs" in result.stderr and "cannot be written" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_port_in_use_names_the_listeners_entry(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = broker(
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override",
            f"log.dirs={tmp_path / 'data'}",
            cwd=tmp_path,
        )
    assert result.returncode == 2
    last = result.stderr.strip().splitlines()[-1]
    assert last == (
        f"logstore-broker: listeners entry PLAINTEXT://127.0.0.1:{port}: "
        f"cannot listen on 127.0.0.1:{port}: "
        f"port {port} is already in use (another broker or program listens there)"
    )


def test_json_logs(tmp_path: Path) -> None:
    env = repo_env()
    port = free_port()
    proc = subprocess.Popen(
        broker_command(
            "--log-format",
            "json",
            overrides={
                "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                "log.dirs": str(tmp_path / "json-data"),
            },
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        banner = json.loads(first)
        assert "listening on" in banner["message"] and banner["level"] == "INFO"
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$", banner["time"])
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert json.loads(out.splitlines()[-1])["message"] == "logstore broker stopped cleanly"
        lines = [json.loads(line) for line in err.splitlines() if line.strip()]
        assert lines and all(
            {"time", "level", "logger", "message"} <= line.keys() for line in lines
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_text_banner_is_timestamped(tmp_path: Path) -> None:
    env = repo_env()
    proc = subprocess.Popen(
        broker_command(
            overrides={
                "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                "log.dirs": str(tmp_path / "data"),
            }
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert TIMESTAMP.match(line) and "listening on" in line, line
        proc.terminate()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
