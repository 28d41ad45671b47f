"""What a small hostile request costs the broker: memory and the longest pause other
clients see (docs/reliability.md, "Amplification requests").

    python benches/amplification_bench.py [--json FILE]

For each request a fresh single broker starts (benches/e2e_helpers.BrokerProc); a probe
connection, made first, sends ApiVersions v0 every 10 ms and times each answer (the
"stall" is its longest wait); the request goes out on its own connection, encoded with
the project's codec, and its answer is read in full. Memory is the broker's ``VmRSS``
before the request and its peak ``VmHWM`` after. Nothing here asserts a figure.
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e_helpers import BrokerProc, read_frame  # noqa: E402

from logstore.protocol.api_keys import ApiKey  # noqa: E402
from logstore.protocol.frame import encode_request  # noqa: E402
from logstore.protocol.headers import RequestHeader  # noqa: E402
from logstore.protocol.messages.group_admin import DescribeGroupsRequest  # noqa: E402
from logstore.protocol.messages.metadata import MetadataRequest  # noqa: E402

N = 1_000_000


def _status(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


class Probe:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        request = struct.pack(">ihhih", 10, 18, 0, 7, -1)  # ApiVersions v0, null client id
        while not self.stop.is_set():
            sent = time.monotonic()
            self.sock.sendall(request)
            read_frame(self.sock)
            self.latencies.append(time.monotonic() - sent)
            time.sleep(0.01)


def requests() -> dict[str, tuple[ApiKey, int, object]]:
    return {
        "DescribeGroups v5, 1 M empty group ids": (
            ApiKey.DESCRIBE_GROUPS,
            5,
            DescribeGroupsRequest(groups=[""] * N, include_authorized_operations=False),
        ),
        "Metadata v12, 1 M zero topic ids": (
            ApiKey.METADATA,
            12,
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=None)]
                * N,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        ),
        "Metadata v12, 1 M distinct topic ids": (
            ApiKey.METADATA,
            12,
            MetadataRequest(
                topics=[
                    MetadataRequest.MetadataRequestTopic(topic_id=uuid.uuid4(), name=None)
                    for _ in range(N)
                ],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
        ),
    }


def measure(name: str, api_key: ApiKey, version: int, body) -> dict:
    frame = encode_request(
        RequestHeader(
            api_key=int(api_key), api_version=version, correlation_id=1, client_id="amplification"
        ),
        body,
    )
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProc(Path(tmp))
        broker.start()
        try:
            pid = broker.proc.pid
            probe = Probe(broker.port)
            probe.thread.start()
            time.sleep(0.5)
            rss_before = _status(pid, "VmRSS")
            with socket.create_connection(("127.0.0.1", broker.port), timeout=300) as s:
                started = time.monotonic()
                s.sendall(frame)
                answer = read_frame(s)
                took = time.monotonic() - started
            time.sleep(0.3)
            probe.stop.set()
            probe.thread.join(30)
            return {
                "request": name,
                "frame_mb": round(len(frame) / 2**20, 1),
                "answer_mb": round(len(answer) / 2**20, 1),
                "rss_before_mb": round(rss_before),
                "peak_mb": round(_status(pid, "VmHWM")),
                "stall_s": round(max(probe.latencies), 2),
                "answered_in_s": round(took, 2),
            }
        finally:
            broker.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    rows = [measure(name, *spec) for name, spec in requests().items()]
    print("| request | frame | answer | memory before -> peak | stall | answered in |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['request']} | {r['frame_mb']} MB | {r['answer_mb']} MB | {r['rss_before_mb']} "
            f"-> {r['peak_mb']} MB | {r['stall_s']} s | {r['answered_in_s']} s |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
