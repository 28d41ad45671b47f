"""The primary election's group protocol, as Confluent's and Karapace's registries speak it.

Every instance joins the Kafka group `schema-registry` with protocol type "sr" and one
protocol, "v0", whose metadata is the member's identity JSON:

    {"version":1,"host":H,"port":P,"scheme":"http"|"https","master_eligibility":true}

The group leader picks the primary: the eligible member with the lowest URL
(`scheme://host:port`; the lowest of all members if none is eligible) and gives every member the
same assignment JSON:

    {"version":1,"error":0,"master":MEMBER_ID,"master_identity":IDENTITY}

A member is the primary when `master` is its member id and the identity is eligible. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PROTOCOL_TYPE = "sr"
PROTOCOL_NAME = "v0"
DEFAULT_GROUP = "schema-registry"


@dataclass(frozen=True)
class Identity:
    host: str
    port: int
    scheme: str = "http"
    eligible: bool = True

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "host": self.host,
            "port": self.port,
            "scheme": self.scheme,
            "master_eligibility": self.eligible,
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @staticmethod
    def from_json(doc: Any) -> Identity:
        if not isinstance(doc, dict):
            raise ValueError("identity is not a JSON object")
        host, port = doc.get("host"), doc.get("port")
        if not isinstance(host, str) or not isinstance(port, int):
            raise ValueError("identity without host and port")
        scheme = doc.get("scheme", "http")
        eligible = doc.get("master_eligibility", doc.get("leader_eligibility", True))
        return Identity(host, port, scheme if isinstance(scheme, str) else "http", bool(eligible))

    @staticmethod
    def decode(raw: bytes) -> Identity:
        return Identity.from_json(json.loads(raw))


@dataclass(frozen=True)
class Assignment:
    primary_member: str
    primary: Identity
    error: int = 0

    def encode(self) -> bytes:
        doc = {
            "version": 1,
            "error": self.error,
            "master": self.primary_member,
            "master_identity": self.primary.to_json(),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @staticmethod
    def decode(raw: bytes) -> Assignment:
        doc = json.loads(raw)
        if not isinstance(doc, dict) or not isinstance(doc.get("master"), str):
            raise ValueError("assignment without master")
        error = doc.get("error", 0)
        return Assignment(
            doc["master"],
            Identity.from_json(doc.get("master_identity")),
            error if isinstance(error, int) else 0,
        )


def choose_primary(members: list[tuple[str, bytes]]) -> dict[str, bytes]:
    """The group leader's assignment: member id -> assignment bytes, the same for all.

    Members whose metadata does not parse are never chosen.
    """
    parsed: list[tuple[str, str, Identity]] = []
    for member_id, metadata in members:
        try:
            ident = Identity.decode(metadata)
        except ValueError:
            continue
        parsed.append((ident.url, member_id, ident))
    eligible = [p for p in parsed if p[2].eligible] or parsed
    if not eligible:
        return {member_id: b"" for member_id, _ in members}
    _, primary_member, primary = min(eligible)
    raw = Assignment(primary_member, primary).encode()
    return {member_id: raw for member_id, _ in members}
