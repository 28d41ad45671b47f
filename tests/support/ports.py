"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on at the moment of the call (the kernel's pick for a
    bind to 127.0.0.1:0); a process started right after can listen on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
