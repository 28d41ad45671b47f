"""The broker's malloc settings: applied where glibc is, harmless where it is not."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from broker_py.network import allocator

_FAULTS = """
import resource, sys
if sys.argv[1] == "retain":
    from broker_py.network.allocator import retain_request_buffers
    assert retain_request_buffers()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
# Requests in flight together, then freed together: with glibc's defaults the freed top
# of the heap goes back to the kernel and the next requests fault their pages in again.
x = [bytearray(1 << 20) for _ in range(4)]
del x
before = faults()
for _ in range(50):
    x = [bytearray(1 << 20) for _ in range(4)]
    del x
print(faults() - before)
"""


def _page_faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True
    )
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt thresholds are glibc's")
def test_freed_request_buffers_are_reused_without_page_faults():
    # 50 rounds of 4 fresh 1 MB buffers (51,200 pages) fault in fewer pages than one
    # buffer has (256): the freed buffers stay in the heap and are used again. How many
    # faults glibc's defaults cost instead depends on the host (transparent huge pages,
    # the kernel's fault-around), so that figure is not asserted.
    assert _page_faults("retain") < 256


def test_the_thresholds_set_are_glibcs_ceiling_and_the_trim_threshold(monkeypatch):
    calls = []

    class Recorder:
        def __init__(self):
            def mallopt(param, value):
                calls.append((param, value))
                return 1

            self.mallopt = mallopt

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda _name: Recorder())
    assert allocator.retain_request_buffers() is True
    assert calls == [
        (allocator.M_MMAP_THRESHOLD, 32 << 20),
        (allocator.M_TRIM_THRESHOLD, allocator.TRIM_THRESHOLD),
    ]


def test_without_mallopt_nothing_changes(monkeypatch):
    class NoMallopt:
        def __getattr__(self, name):
            raise AttributeError(name)

    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda _name: NoMallopt())
    assert allocator.retain_request_buffers() is False
