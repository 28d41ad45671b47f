"""The names of librdkafka's configuration properties, for a hint when ``-X`` names one
it does not know: :func:`nearest` (``difflib``).

librdkafka prints its property table with ``rd_kafka_conf_properties_show(FILE *)``
(the table of its CONFIGURATION.md: ``name | C/P | range | default | importance |
description`` rows). The names are read from that table, printed by the librdkafka
that confluent-kafka loaded (``ctypes``, into a temporary file). Where that library
cannot be found or called, the names are the ones the connection options set.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import difflib
import functools
import glob
import os
import re
import tempfile

_ROW = re.compile(r"^([a-z][a-z0-9._]*)\s+\|", re.MULTILINE)
_FALLBACK = (
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "client.id",
    "debug",
)


def _library() -> ctypes.CDLL | None:
    import confluent_kafka

    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    for path in [
        *sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"))),
        ctypes.util.find_library("rdkafka"),
    ]:
        if path:
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    return None


@functools.cache
def names() -> tuple[str, ...]:
    """Every property name librdkafka knows (global and topic properties)."""
    lib = _library()
    libc_name = ctypes.util.find_library("c")
    if lib is None or libc_name is None:
        return _FALLBACK
    try:
        libc = ctypes.CDLL(libc_name)
        libc.fdopen.restype = ctypes.c_void_p
        libc.fdopen.argtypes = [ctypes.c_int, ctypes.c_char_p]
        libc.fclose.argtypes = [ctypes.c_void_p]
        lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
        with tempfile.TemporaryFile() as f:
            fp = libc.fdopen(os.dup(f.fileno()), b"w")
            if not fp:
                return _FALLBACK
            lib.rd_kafka_conf_properties_show(fp)
            libc.fclose(fp)
            f.seek(0)
            table = f.read().decode("utf-8", errors="replace")
    except (AttributeError, OSError):
        return _FALLBACK
    found = tuple(sorted(set(_ROW.findall(table))))
    return found or _FALLBACK


def nearest(name: str, extra: tuple[str, ...] = ()) -> str | None:
    """The known property name closest to ``name`` (or to one of ``extra``), if any is
    close."""
    near = difflib.get_close_matches(name, [*names(), *extra], n=1, cutoff=0.7)
    return near[0] if near else None
