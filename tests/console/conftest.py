"""A console (``logstore console``) run as a subprocess, and HTTP helpers to read its
pages: the HTML, the form token its forms carry."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tests.support.ports import free_port
from tests.support.processes import repo_env, wait_for_output

READY = b"logstore console: serving"


class ConsoleProcess:
    def __init__(self, bootstrap: str, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "logstore",
                "console",
                "-b",
                bootstrap,
                "--listen",
                f"127.0.0.1:{self.port}",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=repo_env(),
        )
        ready, out = wait_for_output(self.proc, READY, 30)
        if not ready:
            self.stop()
            raise RuntimeError(f"console did not start: {out!r}")

    def stop(self) -> str:
        """Stops the console; returns its stderr."""
        self.proc.terminate()
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=15)
        return err.decode("utf-8", "replace")

    def get(self, path: str, auth: tuple[str, str] | None = None) -> tuple[int, str]:
        return self.request(path, None, auth)

    def post(
        self, path: str, form: dict[str, str], auth: tuple[str, str] | None = None
    ) -> tuple[int, str]:
        return self.request(path, urllib.parse.urlencode(form).encode(), auth)

    def request(
        self, path: str, data: bytes | None, auth: tuple[str, str] | None = None
    ) -> tuple[int, str]:
        headers: dict[str, Any] = {}
        if auth:
            headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode(
                "ascii"
            )
        req = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


def form_token(html: str) -> str:
    m = re.search(r'name="token" value="([^"]+)"', html)
    assert m, "no form token on the page"
    return m.group(1)


def text_of(html: str) -> str:
    """The page's text: tags dropped, whitespace runs made one space."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()
