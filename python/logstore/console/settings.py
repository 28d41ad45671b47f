"""The console's own options: where it listens, who may open it, whether it may change
anything. Pure: parsing only.

``--listen HOST:PORT`` (default ``127.0.0.1:8080``). ``--basic-auth`` is ``USER:PASS``
or the path of a file holding one ``USER:PASS`` per line (blank lines and ``#`` lines
skipped). Without basic auth the console only listens on a loopback address.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os

DEFAULT_LISTEN = "127.0.0.1:8080"


class SettingsError(ValueError):
    """An option the console cannot start with (the message says which and why)."""


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    registry: str | None = None
    allow_writes: bool = False
    # user -> password; empty: no authentication (loopback only)
    users: tuple[tuple[str, str], ...] = ()
    sample_interval: float = 5.0


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as (host, port)."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise SettingsError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    host = host.strip("[]") or "127.0.0.1"
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_basic_auth(text: str) -> tuple[tuple[str, str], ...]:
    """The users of ``--basic-auth``: ``USER:PASS`` itself, or a file of such lines."""
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            lines = [s.strip() for s in f if s.strip() and not s.lstrip().startswith("#")]
        where = f"--basic-auth file {text}"
    else:
        lines, where = [text], "--basic-auth"
    users = []
    for line in lines:
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise SettingsError(f"{where}: expected USER:PASS (or a file of USER:PASS lines)")
        users.append((user, password))
    if not users:
        raise SettingsError(f"{where}: no USER:PASS line")
    return tuple(users)


def settings(
    listen: str,
    registry: str | None,
    allow_writes: bool,
    basic_auth: str | None,
    sample_interval: float,
) -> Settings:
    host, port = parse_listen(listen)
    users = parse_basic_auth(basic_auth) if basic_auth else ()
    if not users and not is_loopback(host):
        raise SettingsError(
            f"--listen {listen}: not a loopback address; give --basic-auth to serve it"
        )
    if registry is not None and not registry.startswith(("http://", "https://")):
        raise SettingsError(f"--registry {registry!r}: expected an http:// or https:// URL")
    return Settings(
        host=host,
        port=port,
        registry=registry.rstrip("/") if registry else None,
        allow_writes=allow_writes,
        users=users,
        sample_interval=sample_interval,
    )
