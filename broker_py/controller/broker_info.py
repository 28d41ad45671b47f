"""A broker as it registers with the controller (Kafka's ``BrokerInfo``, ``EndPoint``):
its id, its listeners' advertised endpoints, rack and features. ``zk_data`` reads and
writes it as ``/brokers/ids/<id>``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple


class EndPoint(NamedTuple):
    listener_name: str
    host: str | None  # None: the wildcard address
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = "" if self.host is None else f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    features: dict[str, tuple[int, int]] = field(
        default_factory=dict
    )  # name -> supported (min, max)
    jmx_port: int = -1
    timestamp_ms: int | None = None  # required to encode
    version: int = 5
