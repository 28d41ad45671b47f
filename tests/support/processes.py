"""Starting, stopping and killing the processes a test runs: the repository's broker
(``python -m broker_py``) and any other child process.

- :func:`repo_env`: the environment for a child that imports the repository's packages
  (``REPO_ROOT`` first on ``PYTHONPATH``; an editable install of the native module does
  not carry ``broker_py``).
- :func:`broker_command`: the argument list of a broker with ``--override`` settings.
- :func:`wait_for_output`: reads a child's stdout until a marker line appears (the
  broker prints ``listening on`` once it serves).
- :func:`terminate`: SIGTERM and wait, SIGKILL after a timeout; :func:`kill`: SIGKILL
  and reap; :func:`wait_stopped`: wait until a SIGSTOP took effect.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LISTENING = b"listening on"  # what the broker prints on stdout once it serves


def repo_env(**extra: str) -> dict[str, str]:
    """``os.environ`` with ``REPO_ROOT`` first on ``PYTHONPATH``, plus ``extra``."""
    path = os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, **extra}


def broker_command(*args: str, overrides: Mapping[str, str] | None = None) -> list[str]:
    """``python -m broker_py`` with ``args``, then one ``--override k=v`` per setting."""
    command = [sys.executable, "-m", "broker_py", *args]
    for k, v in (overrides or {}).items():
        command += ["--override", f"{k}={v}"]
    return command


def wait_for_output(
    proc: subprocess.Popen[bytes], marker: bytes = LISTENING, timeout: float = 30.0
) -> tuple[bool, bytes]:
    """Reads ``proc``'s stdout (a pipe) until ``marker`` appears: ``(True, what was
    read)``; ``(False, what was read)`` once the process exited or ``timeout`` seconds
    passed first. Reads raw chunks, so bytes after the marker may be consumed too."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    out = b""
    while marker not in out:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None:
            return False, out
        ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.5))
        if ready:
            out += os.read(proc.stdout.fileno(), 4096)
    return True, out


def terminate(proc: subprocess.Popen[bytes], timeout: float = 30.0) -> int:
    """SIGCONT (in case it is paused) and SIGTERM, then waits: the exit code. If it has
    not exited within ``timeout`` seconds it is SIGKILLed and reaped, and
    ``subprocess.TimeoutExpired`` propagates."""
    if proc.poll() is not None:
        return proc.returncode
    proc.send_signal(signal.SIGCONT)
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def kill(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL (no shutdown code runs) if it still runs, and reaps it: the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    return proc.wait()


def wait_stopped(pid: int, timeout: float = 10.0) -> None:
    """Waits until every thread of ``pid`` is stopped (state T in
    ``/proc/<pid>/task/*/stat``): a SIGSTOP takes effect asynchronously, and a process
    frozen "now" must not answer one more request."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
        except OSError:
            return  # gone
        if states and all(st in ("T", "t", "Z", "X") for st in states):
            return
        time.sleep(0.005)
    raise RuntimeError(f"process {pid} did not stop within {timeout}s")
