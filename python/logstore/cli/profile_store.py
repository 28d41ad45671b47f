"""Connection profiles (as ``rpk profile``): named sets of connection options kept in
``profiles.json`` under the user's config dir (``click.get_app_dir("logstore")``, i.e.
``$XDG_CONFIG_HOME/logstore``, else ``~/.config/logstore``)::

    {"current": "prod" | null,
     "profiles": {"prod": {"brokers": "k1:9092,k2:9092", "user": "alice",
                           "password": "...", "tls": true, "extra": ["acks=all"], ...}}}

A profile holds any of :data:`FIELDS` (the connection options' names, as
:class:`ClientOptions` spells them). The file holds passwords, so it is written with mode
0600 only: to a new temporary file (``mkstemp`` makes it 0600) in the same directory,
then renamed over the old one; the directory is made 0700.

:func:`apply` fills a broker command's options from a profile: for each option, a flag
wins, then its environment variable, then the profile (``--profile NAME`` or
``$LOGSTORE_PROFILE``, else the current one), then the option's default. ``-X`` pairs
add up: the profile's first, the flags' after (a later pair overrides an earlier one).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from logstore.cli.common import CliError

# The connection options of every broker command (ClientOptions' fields but verbose).
FIELDS = (
    "brokers",
    "security_protocol",
    "sasl_mechanism",
    "user",
    "password",
    "tls",
    "tls_ca",
    "tls_cert",
    "tls_key",
    "extra",
    "timeout",
)
PATH_FIELDS = ("tls_ca", "tls_cert", "tls_key")  # stored as absolute paths
FILE_NAME = "profiles.json"
PROFILE_ENV = "LOGSTORE_PROFILE"


def path() -> Path:
    return Path(click.get_app_dir("logstore")) / FILE_NAME


@dataclasses.dataclass
class Profiles:
    current: str | None = None
    profiles: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def get(self, name: str) -> dict[str, Any]:
        """The profile ``name``; CliError (exit status 2) naming the known ones if none."""
        if name not in self.profiles:
            known = ", ".join(sorted(self.profiles)) or "none"
            raise CliError(f"no profile named {name!r} (profiles: {known}; see {path()})")
        return self.profiles[name]


def load() -> Profiles:
    """The profiles file's contents; empty when there is no file, CliError when it is
    not a profiles file."""
    p = path()
    try:
        text = p.read_text()
    except FileNotFoundError:
        return Profiles()
    except OSError as exc:
        raise CliError(f"{p}: {exc.strerror}") from None
    try:
        data = json.loads(text)
        current = data.get("current")
        profiles = data.get("profiles", {})
        valid = (current is None or isinstance(current, str)) and isinstance(profiles, dict)
        valid = valid and all(isinstance(v, dict) for v in profiles.values())
    except (ValueError, AttributeError):
        valid = False
    if not valid:
        raise CliError(f"{p}: not a profiles file (expected {{'current', 'profiles'}} JSON)")
    return Profiles(current, {k: _known(v) for k, v in profiles.items()})


def _known(profile: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in profile.items() if k in FIELDS}


def save(profiles: Profiles) -> Path:
    """Writes the file (mode 0600, replaced atomically); returns its path."""
    p = path()
    try:
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".profiles-", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(dataclasses.asdict(profiles), f, indent=2, sort_keys=True)
                f.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CliError(f"{p}: {exc.strerror or exc}") from None
    return p


def given(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The connection options of ``values`` that a flag or an environment variable set
    (not a default), as a profile stores them."""
    out: dict[str, Any] = {}
    for name in FIELDS:
        if name in values and _was_given(ctx, name):
            value = values[name]
            if name in PATH_FIELDS and value is not None:
                value = os.path.abspath(value)
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _was_given(ctx: click.Context, name: str) -> bool:
    return ctx.get_parameter_source(name) in (
        ParameterSource.COMMANDLINE,
        ParameterSource.ENVIRONMENT,
    )


def apply(ctx: click.Context, values: dict[str, Any], name: str | None) -> None:
    """Fills ``values`` (a broker command's connection options, by ClientOptions'
    names) from the profile ``name`` (None: the current one, if any) wherever no flag
    or environment variable set the option."""
    profiles = load()
    if name is None:
        name = profiles.current
        if name is None or name not in profiles.profiles:
            return
    profile = profiles.get(name)
    for key, value in profile.items():
        if key not in values:
            continue
        if key == "extra":
            values[key] = (*value, *values[key])
        elif not _was_given(ctx, key):
            values[key] = value


option = click.option(
    "--profile",
    envvar=PROFILE_ENV,
    metavar="NAME",
    help=f"connection options from this profile (env {PROFILE_ENV}; default: the current one)",
)
