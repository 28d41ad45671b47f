"""The registry: its state (read from `_schemas`), its store, and its role (primary or not).

Reads are answered from the local state once `ready` (the first full read of `_schemas`).
Writes run on the primary only (the HTTP layer forwards them otherwise), one at a time: the
primary reads `_schemas` to its end, plans the write's records against the state, produces
them and returns once it has read them back, so what a write returns is in the state.

Parsing and compatibility checking run off the event loop, in the registry's own pool of
PARSE_WORKERS threads (`off_loop`): a large schema takes seconds of pure-Python grammar
(PROTOBUF ~30 us a byte) and the loop is the broker's. The GIL passes between the threads
every switch interval (5 ms), so the loop keeps serving Kafka clients meanwhile. What a
worker reads of the state is read-only; records are planned on the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from logstore.schema_registry import errors
from logstore.schema_registry.records import Key, Record, SchemaRef, SchemaValue, Value
from logstore.schema_registry.schemas import (
    COMPATIBILITY_LEVELS,
    ParsedSchema,
    Reference,
    check_compatibility,
    parse_schema,
    resolve_references,
)
from logstore.schema_registry.state import RegistryState, identity

log = logging.getLogger(__name__)

PARSE_WORKERS = 2


class Store(Protocol):
    applied: int

    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def catch_up(self) -> None: ...
    async def write(self, records: list[Record]) -> int: ...
    async def wait_for(self, offset: int) -> None: ...


@dataclass
class SchemaRequest:
    """A schema as a request carries it (register, lookup, compatibility check)."""

    schema: str
    schema_type: str = "AVRO"
    references: tuple[Reference, ...] = ()
    id: int | None = None
    version: int | None = None

    @staticmethod
    def from_json(doc: Any) -> SchemaRequest:
        if not isinstance(doc, dict):
            raise errors.UnprocessableEntityError("The request body is not a JSON object")
        schema = doc.get("schema")
        if not isinstance(schema, str):
            raise errors.InvalidSchemaError("Empty schema")
        kind = doc.get("schemaType") or "AVRO"
        if not isinstance(kind, str):
            raise errors.UnprocessableEntityError("schemaType is not a string")
        refs = doc.get("references") or []
        if not isinstance(refs, list):
            raise errors.UnprocessableEntityError("references is not a list")
        out = []
        for r in refs:
            if (
                not isinstance(r, dict)
                or not isinstance(r.get("name"), str)
                or not isinstance(r.get("subject"), str)
                or not isinstance(r.get("version"), int)
            ):
                raise errors.UnprocessableEntityError(
                    "A reference needs a name, a subject and a version"
                )
            out.append(Reference(r["name"], r["subject"], r["version"]))
        sid, ver = doc.get("id"), doc.get("version")
        return SchemaRequest(
            schema,
            kind.upper(),
            tuple(out),
            sid if isinstance(sid, int) and sid >= 0 else None,
            ver if isinstance(ver, int) and ver >= 0 else None,
        )


def schema_json(sv: SchemaValue, *, with_subject: bool = True) -> dict[str, Any]:
    """A stored schema as the API shows it (schemaType and references only when present)."""
    doc: dict[str, Any] = {}
    if with_subject:
        doc.update(subject=sv.subject, version=sv.version, id=sv.id)
    if sv.schema_type != "AVRO":
        doc["schemaType"] = sv.schema_type
    if sv.references:
        doc["references"] = [r.to_json() for r in sv.references]
    doc["schema"] = sv.schema
    return doc


class Registry:
    def __init__(self, make_store: Callable[[Callable[[Key, Value | None], None]], Store]) -> None:
        self.state = RegistryState()
        self.store = make_store(self.state.apply)
        self.ready = asyncio.Event()
        self.is_primary = False
        self.primary_url: str | None = None
        self._write_lock = asyncio.Lock()
        self._primary_since_catch_up = False
        self._pool = ThreadPoolExecutor(PARSE_WORKERS, thread_name_prefix="schema-parse")

    async def off_loop(self, fn: Callable[[], Any]) -> Any:
        """fn() run in the registry's parse pool (parsing, compatibility checks)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    async def start(self) -> None:
        await self.store.start()
        await self.store.catch_up()
        self.ready.set()

    async def stop(self) -> None:
        await self.store.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def set_primary(self, url: str | None, is_primary: bool) -> None:
        if is_primary and not self.is_primary:
            self._primary_since_catch_up = False
        self.primary_url, self.is_primary = url, is_primary

    # -- parsing ----------------------------------------------------------------------------

    def _lookup(self, subject: str, version: int) -> tuple[str, str, Sequence[Reference]] | None:
        try:
            sv = self.state.get_version(subject, version, deleted=True)
        except errors.SchemaRegistryError:
            return None
        return (
            sv.schema_type,
            sv.schema,
            [Reference(r.name, r.subject, r.version) for r in sv.references],
        )

    def parse(self, req: SchemaRequest, normalize: bool = False) -> ParsedSchema:
        refs = resolve_references(req.references, self._lookup)
        parsed = parse_schema(req.schema_type, req.schema, refs)
        return parsed.normalized() if normalize else parsed

    def parse_stored(self, sv: SchemaValue) -> ParsedSchema:
        return self.parse(
            SchemaRequest(
                sv.schema,
                sv.schema_type,
                tuple(Reference(r.name, r.subject, r.version) for r in sv.references),
            )
        )

    @staticmethod
    def _refs(req: SchemaRequest) -> tuple[SchemaRef, ...]:
        return tuple(SchemaRef(r.name, r.subject, r.version) for r in req.references)

    def find(
        self,
        subject: str,
        req: SchemaRequest,
        normalize: bool,
        deleted: bool = False,
        parsed: ParsedSchema | None = None,
    ) -> SchemaValue | None:
        """The version of `subject` holding `req`'s schema (`parsed`: req already parsed)."""
        if parsed is None:
            parsed = self.parse(req, normalize)
        ident = identity(parsed.schema_type, parsed.canonical(), self._refs(req))
        found = self.state.find(subject, ident, deleted)
        if found is not None:
            return found
        versions = self.state.subjects.get(subject, {})
        for v in sorted(versions, reverse=True):
            sv = versions[v]
            if (deleted or not sv.deleted) and sv.schema_type == parsed.schema_type:
                if sv.references == ident[2]:
                    try:
                        stored = self.parse_stored(sv)
                        if normalize:
                            stored = stored.normalized()
                    except errors.SchemaRegistryError:
                        continue
                    if stored.deep_equals(parsed):
                        return sv
        return None

    # -- compatibility ----------------------------------------------------------------------

    def compatibility_messages(
        self, subject: str, new: ParsedSchema, against: list[SchemaValue], level: str
    ) -> list[str]:
        olds = [self.parse_stored(sv) for sv in against]
        messages = check_compatibility(level, new, olds, [sv.version for sv in against])
        if messages:
            messages = [*messages, f"{{compatibility: '{level}'}}"]
        return messages

    def live_versions_newest_first(self, subject: str) -> list[SchemaValue]:
        versions = self.state.subjects.get(subject, {})
        return [versions[v] for v in sorted(versions, reverse=True) if not versions[v].deleted]

    # -- writes (primary only) --------------------------------------------------------------

    async def _write(self, plan: Callable[[], tuple[list[Record], Any]]) -> Any:
        if not self.is_primary:
            raise errors.UnknownLeaderError("This instance is not the primary")
        async with self._write_lock:
            await self.store.catch_up()
            records, result = plan()
            if records:
                offset = await self.store.write(records)
                await self.store.wait_for(offset)
            return result

    async def register(self, subject: str, req: SchemaRequest, normalize: bool | None) -> int:
        if not self.is_primary:
            raise errors.UnknownLeaderError("This instance is not the primary")
        norm = self.state.normalize(subject) if normalize is None else normalize
        self.state.check_writable(subject)
        # parsed off the loop and outside the write lock: a large schema holds up neither
        parsed: ParsedSchema = await self.off_loop(lambda: self.parse(req, norm))

        def check(importing: bool, level: str) -> int | None:
            """The id when `req` is registered already; raises when it is incompatible."""
            existing = self.find(subject, req, norm, parsed=parsed)
            if existing is not None and req.id in (None, existing.id):
                return existing.id
            if not importing:
                messages = self.compatibility_messages(
                    subject, parsed, self.live_versions_newest_first(subject), level
                )
                if messages:
                    raise errors.IncompatibleSchemaError(
                        "Schema being registered is incompatible with an earlier schema for "
                        f'subject "{subject}", details: [{", ".join(messages)}]'
                    )
            return None

        async with self._write_lock:
            await self.store.catch_up()
            if not self.is_primary:
                raise errors.UnknownLeaderError("This instance is not the primary")
            self.state.check_writable(subject)
            for ref in req.references:  # still there after the parse (404s otherwise)
                self.state.get_version(ref.subject, ref.version, deleted=True)
            importing = self.state.mode(subject) == "IMPORT"
            level = self.state.compatibility(subject)
            known: int | None = await self.off_loop(lambda: check(importing, level))
            if known is not None:
                return known
            records, schema_id = self.state.plan_register(
                subject,
                parsed.schema_type,
                parsed.canonical(),
                self._refs(req),
                req.id,  # refused (42205) outside IMPORT mode
                req.version if importing and req.version else None,
            )
            if records:
                offset = await self.store.write(records)
                await self.store.wait_for(offset)
            return schema_id

    async def delete_version(self, subject: str, version: int | str, permanent: bool) -> int:
        result: int = await self._write(
            lambda: self.state.plan_delete_version(subject, version, permanent)
        )
        return result

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        result: list[int] = await self._write(
            lambda: self.state.plan_delete_subject(subject, permanent)
        )
        return result

    async def set_config(
        self, subject: str | None, compatibility: str, normalize: bool | None
    ) -> None:
        if compatibility not in COMPATIBILITY_LEVELS:
            raise errors.InvalidCompatibilityLevelError(
                f"Invalid compatibility level. Valid values are none, backward, forward, full, "
                f"backward_transitive, forward_transitive, and full_transitive: {compatibility}"
            )
        await self._write(lambda: (self.state.plan_config(subject, compatibility, normalize), None))

    async def delete_config(self, subject: str | None) -> str:
        old = self.state.compatibility(subject)
        await self._write(lambda: (self.state.plan_delete_config(subject), None))
        return old

    async def set_mode(self, subject: str | None, mode: str, force: bool) -> None:
        await self._write(lambda: (self.state.plan_mode(subject, mode, force), None))

    async def delete_mode(self, subject: str) -> str:
        old = self.state.mode(subject)
        await self._write(lambda: (self.state.plan_delete_mode(subject), None))
        return old
