"""Client quota entities, keys and filters (KIP-546), pure.

An entity names a user, a client id or both; each part is a name or the default entity
(:data:`DEFAULT`) of its type. Where an entity's quotas are stored (a broker alone's
file, a cluster's ZooKeeper) is its *entity path*, Kafka's ZooKeeper layout under
``/config``::

    users/<user>                    users/<default>
    clients/<client id>             clients/<default>
    users/<user>/clients/<client>   (either part may be <default>)
    ips/<address>                   ips/<default>

with each name sanitized as Kafka's ``Sanitizer`` does (URL-encoded, ``*`` as ``%2A``),
so ``<default>`` never names a real entity.

Keys and value rules (as Kafka's controller checks them, every refusal INVALID_REQUEST):
``producer_byte_rate`` and ``consumer_byte_rate`` are whole numbers of bytes per second,
``request_percentage`` and ``controller_mutation_rate`` any positive number; every value
must be greater than 0 (and finite); an unknown key is refused. An IP entity stands
alone (never with a user or client id), names an IP address (Kafka also takes a host
name it can resolve; this broker does not resolve names) or the default, and takes only
``connection_creation_rate``, a whole number of connections per second.
"""

from __future__ import annotations

import enum
import ipaddress
import math
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Each quota key and whether its value is a whole number (Kafka's LONG keys).
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
# An IP entity's keys: Kafka's INT.
IP_KEYS: dict[str, bool] = {CONNECTION_CREATION_RATE: True}
ALL_KEYS = frozenset(QUOTA_KEYS) | frozenset(IP_KEYS)
_LONG_MAX = 2**63 - 1
_INT_MAX = 2**31 - 1
_DEFAULT_NODE = "<default>"

# Describe filter match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


class Default(enum.Enum):
    """The default entity of a type (a null entity name on the wire)."""

    DEFAULT = _DEFAULT_NODE


DEFAULT = Default.DEFAULT

# A part of an entity: None (the entity has no part of that type), DEFAULT, or a name.
Name = str | Default | None


class QuotaEntityError(ValueError):
    """An entity, key, value or filter Kafka refuses; ``unsupported`` marks the refusals
    Kafka answers with UNSUPPORTED_VERSION instead of INVALID_REQUEST."""

    def __init__(self, message: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


@dataclass(frozen=True)
class QuotaEntity:
    user: Name = None
    client_id: Name = None
    ip: Name = None  # an IP entity has no other part

    @property
    def keys(self) -> dict[str, bool]:
        """The quota keys this entity takes (and whether each is a whole number)."""
        return IP_KEYS if self.ip is not None else QUOTA_KEYS

    def wire(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default) pairs, user first."""
        out: list[tuple[str, str | None]] = []
        for kind, part in ((USER, self.user), (CLIENT_ID, self.client_id), (IP, self.ip)):
            if part is not None:
                out.append((kind, None if part is DEFAULT else str(part)))
        return out

    def path(self) -> str:
        """The entity path (module docstring)."""
        if self.ip is not None:
            return f"ips/{_node(self.ip)}"
        if self.user is not None and self.client_id is not None:
            return f"users/{_node(self.user)}/clients/{_node(self.client_id)}"
        if self.user is not None:
            return f"users/{_node(self.user)}"
        if self.client_id is not None:
            return f"clients/{_node(self.client_id)}"
        raise QuotaEntityError("Invalid empty client quota entity")

    def __str__(self) -> str:
        return ", ".join(f"{k}={'<default>' if v is None else v}" for k, v in self.wire())


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: URL-encoded UTF-8, ``*`` as ``%2A``."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def _node(part: str | Default) -> str:
    return _DEFAULT_NODE if part is DEFAULT else sanitize(str(part))


def _part(node: str) -> Name:
    if node == _DEFAULT_NODE:
        return DEFAULT
    try:
        return urllib.parse.unquote_plus(node, errors="strict")
    except UnicodeDecodeError:
        return None


def entity_of_path(path: str) -> QuotaEntity | None:
    """The entity an entity path names (None: not a user / client entity path)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        user = _part(parts[1])
        return None if user is None else QuotaEntity(user=user)
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        client = _part(parts[1])
        return None if client is None else QuotaEntity(client_id=client)
    if len(parts) == 2 and parts[0] == "ips" and parts[1]:
        ip = _part(parts[1])
        return None if ip is None else QuotaEntity(ip=ip)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        user, client = _part(parts[1]), _part(parts[3])
        if user is None or client is None or not parts[1] or not parts[3]:
            return None
        return QuotaEntity(user=user, client_id=client)
    return None


def entity_of_wire(pairs: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity an AlterClientQuotas entry names, checked as Kafka's controller checks
    it (QuotaEntityError with Kafka's message)."""
    seen: dict[str, Name] = {}
    pairs = list(pairs)
    if not pairs:
        raise QuotaEntityError("Invalid empty client quota entity")
    for kind, name in pairs:
        if kind in seen:
            raise QuotaEntityError(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaEntityError(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise QuotaEntityError(f"Empty {kind} not supported")
        seen[kind] = DEFAULT if name is None else name
    if IP in seen:
        if len(seen) > 1:
            raise QuotaEntityError(
                "Invalid quota entity combination, IP entity should not be combined with "
                "User or ClientId"
            )
        ip = seen[IP]
        if ip is not DEFAULT:
            try:
                ip = str(ipaddress.ip_address(str(ip)))
            except ValueError:
                raise QuotaEntityError(f"{ip} is not a valid IP or resolvable host.") from None
        return QuotaEntity(ip=ip)
    return QuotaEntity(user=seen.get(USER), client_id=seen.get(CLIENT_ID))


def check_value(key: str, value: float, keys: dict[str, bool] = QUOTA_KEYS) -> None:
    """Refuses a value ``key`` (one of ``keys``) may not take (QuotaEntityError with
    Kafka's message)."""
    whole = keys.get(key)
    if whole is None:
        raise QuotaEntityError(f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaEntityError(f"Quota {key} must be greater than 0")
    if math.isinf(value):
        raise QuotaEntityError(f"Quota {key} must be a finite number")
    if whole:
        if key in IP_KEYS and value > _INT_MAX:
            raise QuotaEntityError(f"Proposed value for {key} is too large for an INT.")
        if value > _LONG_MAX:
            raise QuotaEntityError(f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaEntityError(f"{key} cannot be a fractional value.")


def alter(
    current: Mapping[str, float],
    ops: Iterable[tuple[str, float, bool]],
    keys: dict[str, bool] = QUOTA_KEYS,
) -> dict[str, float]:
    """``current`` with ``ops`` ((key, value, remove) each) applied; refuses a key named
    twice and any value :func:`check_value` refuses, changing nothing."""
    out = dict(current)
    seen: set[str] = set()
    for key, value, remove in ops:
        if key in seen:
            raise QuotaEntityError(f"Duplicate quota key {key} not updating quota for this entity")
        seen.add(key)
        if remove:
            out.pop(key, None)
            continue
        check_value(key, value, keys)
        out[key] = float(round(value)) if keys[key] else float(value)
    return out


def encode_value(key: str, value: float) -> str:
    """How a value is stored: a whole number for the byte rates, else a float
    (``1048576``, ``50.0``), as Kafka writes them."""
    return str(int(value)) if QUOTA_KEYS.get(key) or IP_KEYS.get(key) else repr(float(value))


def decode_values(
    config: Mapping[str, str], keys: dict[str, bool] = QUOTA_KEYS
) -> dict[str, float]:
    """The quota keys (``keys``) among stored config keys (others, such as SCRAM
    credentials sharing a user's node, left out; a value that does not parse is left out
    too)."""
    out: dict[str, float] = {}
    for key, text in config.items():
        if key in keys:
            try:
                value = float(text)
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                out[key] = value
    return out


# ---- describe filters ----


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(frozen=True)
class QuotaFilter:
    """A checked DescribeClientQuotas filter: per type, no component, or the component's
    match (a name, DEFAULT, or ``...`` for any specified entity). As Kafka: an ip
    component matches IP entities only, a user or client-id component user / client-id
    entities only."""

    user: object
    client_id: object
    strict: bool
    ip: object

    def matches(self, entity: QuotaEntity) -> bool:
        if entity.ip is not None:
            if self.user is not _NO_COMPONENT or self.client_id is not _NO_COMPONENT:
                return False
            return _matches(self.ip, entity.ip, self.strict)
        if self.ip is not _NO_COMPONENT:
            return False
        return _matches(self.user, entity.user, self.strict) and _matches(
            self.client_id, entity.client_id, self.strict
        )


_ANY = ...
_NO_COMPONENT = object()


def _matches(component: object, part: Name, strict: bool) -> bool:
    if component is _NO_COMPONENT:
        return part is None or not strict
    if component is _ANY:
        return part is not None
    return part == component


def quota_filter(components: Iterable[FilterComponent], strict: bool) -> QuotaFilter:
    """The filter a request gives, checked as Kafka checks it (QuotaEntityError)."""
    by_type: dict[str, object] = {}
    for c in components:
        if c.entity_type == "":
            raise QuotaEntityError("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise QuotaEntityError(
                f"Custom entity type '{c.entity_type}' not supported", unsupported=True
            )
        if c.entity_type in by_type:
            label = "client" if c.entity_type == CLIENT_ID else c.entity_type
            raise QuotaEntityError(f"Duplicate {label} filter component entity type")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise QuotaEntityError(f"Match for an exact {c.entity_type} must not be null")
            by_type[c.entity_type] = c.match
        elif c.match_type == MATCH_DEFAULT:
            by_type[c.entity_type] = DEFAULT
        elif c.match_type == MATCH_SPECIFIED:
            by_type[c.entity_type] = _ANY
        else:
            raise QuotaEntityError(f"Unexpected match type: {c.match_type}")
    if IP in by_type and (USER in by_type or CLIENT_ID in by_type):
        raise QuotaEntityError(
            "Invalid entity filter component combination, IP filter component should not "
            "be used with user or clientId filter component."
        )
    return QuotaFilter(
        user=by_type.get(USER, _NO_COMPONENT),
        client_id=by_type.get(CLIENT_ID, _NO_COMPONENT),
        strict=strict,
        ip=by_type.get(IP, _NO_COMPONENT),
    )
