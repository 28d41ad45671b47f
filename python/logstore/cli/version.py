"""``logstore version`` and ``logstore-broker --version``: one string for both, with the
installed distribution's version (:mod:`logstore.distribution`)."""

from __future__ import annotations

import platform

from logstore.cli.base import command as cli_command
from logstore.cli.common import EXIT_OK
from logstore.cli.output import Output, format_option
from logstore.distribution import version


def version_string() -> str:
    """``logstore <version> (Python <x.y.z>)``: what both commands print first."""
    return f"logstore {version()} (Python {platform.python_version()})"


def components() -> dict[str, str]:
    """The version of each part the command line runs on."""
    out = {"logstore": version(), "python": platform.python_version()}
    try:
        import confluent_kafka

        ck_version = confluent_kafka.version()
        out["confluent-kafka"] = ck_version if isinstance(ck_version, str) else ck_version[0]
        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:  # pragma: no cover - a dependency
        pass
    return out


@cli_command("version", short_help="Print the version (as logstore-broker --version).")
@format_option
def command(fmt: str) -> int:
    """Print the version of logstore (the same line as logstore-broker --version) and of
    the client library the broker commands use."""
    out = Output(fmt)
    parts = components()
    if out.json:
        out.print_json(parts)
    else:
        out.line(version_string())
        for name in ("confluent-kafka", "librdkafka"):
            if name in parts:
                out.line(f"{name} {parts[name]}")
    return EXIT_OK
