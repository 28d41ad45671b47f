"""Declarative message schemas and the codecs derived from them.

A message is declared once, for all of its versions, as a list of
:class:`Field`\\ s.  Each field names its type and the versions that carry
it, in Kafka's notation: ``"3+"`` (3 and later), ``"0-12"``, ``"5"``,
``"none"``::

    FetchRequest = message(ApiKey.FETCH, "request", [
        Field("replica_id", INT32, "0-14", default=-1),
        Field("max_wait_ms", INT32, "0+"),
        Field("topics", Array(Struct("FetchTopic", [
            Field("topic", STRING, "0-12"),
            Field("topic_id", UUID, "13+"),
            ...
        ])), "0+"),
        Field("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
    ])

From that, :func:`message` builds a class with one attribute per field
(snake_case of Kafka's field name) and one nested class per struct
(``FetchRequest.FetchTopic``).  The encoder and decoder of a version are
generated on first use (see ``_StructCodec``) and cached.

Wire rules the codecs follow:

* Fields are written in declaration order; a field absent from a version
  is skipped when writing, whatever its value, and set to its default when
  reading.  So one response object can be written at any version.
* In flexible versions (the api key's first flexible version and later)
  strings, bytes and arrays use the compact forms, and every struct ends
  with a tagged-field section.
* A field with ``tag=N`` is not written inline: in flexible versions that
  carry it, it goes in the tagged section, and only when its value differs
  from its default.  Tags are written in ascending order.
* Tags a struct does not declare are kept, as raw bytes, in the object's
  ``unknown_tagged_fields`` (tag -> bytes) and written back on encode.
* ``nullable`` names the versions in which ``None`` is allowed.  A struct
  field (not an array of structs) that is nullable is preceded by an int8:
  -1 for null, 1 for present.
"""

from __future__ import annotations

import dataclasses
import struct as _struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from logstore.protocol.errors import (
    EncodeError,
    MalformedMessageError,
    TruncatedMessageError,
    UnsupportedApiVersionError,
)
from logstore.protocol.types import Primitive, Reader, ReadFn, WriteFn, Writer

if TYPE_CHECKING:
    from logstore.protocol.api_keys import ApiKey

__all__ = ["Array", "Field", "Message", "Struct", "StructValue", "Versions", "message"]

_NO_DEFAULT: Any = object()
_HIGHEST = 0x7FFF


class _NoTags(dict[int, bytes]):
    """The ``unknown_tagged_fields`` of every decoded struct that has none: one shared,
    unchangeable empty mapping, so a decoded array of a million structs does not hold
    a million empty dicts. Assign a new dict to add tags."""

    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "a decoded message's empty unknown_tagged_fields is shared; assign a new dict"
        )

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = __ior__ = _refuse


NO_TAGS: dict[int, bytes] = _NoTags()


class Versions:
    """An inclusive version range parsed from ``"3+"``, ``"0-12"``, ``"5"`` or ``"none"``."""

    __slots__ = ("low", "high")

    def __init__(self, spec: str):
        spec = spec.strip()
        if spec == "none":
            self.low, self.high = 1, 0
        elif spec.endswith("+"):
            self.low, self.high = int(spec[:-1]), _HIGHEST
        elif "-" in spec:
            low, high = spec.split("-")
            self.low, self.high = int(low), int(high)
        else:
            self.low = self.high = int(spec)
        if self.low < 0:
            raise ValueError(f"bad version range {spec!r}")

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def is_empty(self) -> bool:
        return self.low > self.high

    def __repr__(self) -> str:
        if self.is_empty():
            return "none"
        if self.high == _HIGHEST:
            return f"{self.low}+"
        return f"{self.low}-{self.high}"


class Array:
    """An array type: ``Array(INT32)`` or ``Array(Struct(...))``."""

    __slots__ = ("element",)

    def __init__(self, element: Primitive | Struct):
        self.element = element

    def __repr__(self) -> str:
        return f"Array({self.element!r})"


class Field:
    """One field of a struct.

    ``versions`` are the versions that carry it; ``nullable`` the versions
    in which it may be ``None``; ``tag`` makes it a tagged field.  The
    default, used for versions that do not carry the field, is the type's
    (0, ``""``, empty list, zero uuid, a default struct, ``None`` for
    records) unless ``default`` is given.
    """

    __slots__ = ("name", "type", "versions", "nullable", "tag", "_default")

    def __init__(
        self,
        name: str,
        type: Primitive | Array | Struct,
        versions: str,
        *,
        nullable: str = "none",
        default: Any = _NO_DEFAULT,
        tag: int | None = None,
    ):
        self.name = name
        self.type = type
        self.versions = Versions(versions)
        self.nullable = Versions(nullable)
        self.tag = tag
        self._default = default
        if isinstance(default, list) and default:
            raise ValueError(f"field {name}: a list default must be empty")

    @property
    def default(self) -> Any:
        """A fresh default value (lists and structs are new objects)."""
        if self._default is not _NO_DEFAULT:
            return [] if isinstance(self._default, list) else self._default
        if isinstance(self.type, Primitive):
            return self.type.default
        if isinstance(self.type, Array):
            return []
        return self.type.cls()

    def has_mutable_default(self) -> bool:
        return self.default is not None and isinstance(self.default, (list, StructValue))

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions!r})"


if TYPE_CHECKING:

    class _GeneratedClass(type):
        """What a checker knows of a generated class: its nested struct classes are set
        at run time (:func:`message`), so each attribute not declared is one."""

        def __getattr__(cls, name: str) -> type[StructValue]: ...

else:
    _GeneratedClass = type


class StructValue(metaclass=_GeneratedClass):
    """Base of every generated struct class (and of :class:`Message`)."""

    __slots__ = ()
    SCHEMA: ClassVar[Struct]

    if TYPE_CHECKING:
        # The fields come from the schema at run time (dataclasses.make_dataclass), so a
        # checker takes any keyword argument and sees every field as Any.
        def __init__(self, **fields: Any) -> None: ...

        def __getattr__(self, name: str) -> Any: ...


class Struct:
    """A struct type: a name and its fields; builds the Python class for it."""

    def __init__(
        self, name: str, fields: Sequence[Field], *, base: type[StructValue] = StructValue
    ):
        self.name = name
        self.fields = tuple(fields)
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"struct {name} declares a field twice")
        tags = [f.tag for f in self.fields if f.tag is not None]
        if len(set(tags)) != len(tags):
            raise ValueError(f"struct {name} declares a tag twice")
        self._codecs: dict[tuple[int, bool], _StructCodec] = {}
        self.cls = self._make_class(base)

    def _make_class(self, base: type[StructValue]) -> type[StructValue]:
        specs: list[tuple[str, Any, Any]] = []
        for f in self.fields:
            if f.has_mutable_default():
                spec = dataclasses.field(default_factory=_factory(f))
            else:
                spec = dataclasses.field(default=f.default)
            specs.append((f.name, Any, spec))
        specs.append(
            ("unknown_tagged_fields", dict, dataclasses.field(default_factory=dict, repr=False))
        )
        # make_dataclass is declared to return a bare ``type``; the class derives from base.
        cls = cast(
            "type[StructValue]",
            dataclasses.make_dataclass(
                self.name, specs, bases=(base,), kw_only=True, slots=True, eq=True
            ),
        )
        cls.SCHEMA = self
        return cls

    def nested(self) -> Iterator[Struct]:
        """Every struct reachable from this one's fields, each once."""
        seen: set[int] = set()
        stack = [self]
        while stack:
            s = stack.pop()
            for f in s.fields:
                t = f.type.element if isinstance(f.type, Array) else f.type
                if isinstance(t, Struct) and id(t) not in seen:
                    seen.add(id(t))
                    yield t
                    stack.append(t)

    def codec(self, version: int, flexible: bool) -> _StructCodec:
        key = (version, flexible)
        codec = self._codecs.get(key)
        if codec is None:
            codec = self._codecs[key] = _StructCodec(self, version, flexible)
        return codec

    def __repr__(self) -> str:
        return f"Struct({self.name!r})"


def _factory(f: Field) -> Any:
    if isinstance(f.type, Struct) and f._default is _NO_DEFAULT:
        return f.type.cls
    return list


# --------------------------------------------------------------------------
# Codecs


def _type_reader(
    t: Primitive | Array | Struct, version: int, flexible: bool, nullable: bool
) -> ReadFn:
    if isinstance(t, Primitive):
        return t.reader(flexible, nullable)
    if isinstance(t, Array):
        return _array_reader(
            _type_reader(t.element, version, flexible, False),
            flexible,
            nullable,
            _min_size(t.element, version, flexible, False),
        )
    read = t.codec(version, flexible).read
    if not nullable:
        return read

    def read_nullable(r: Reader) -> Any:
        return None if r.int8() < 0 else read(r)

    return read_nullable


def _type_writer(
    t: Primitive | Array | Struct, version: int, flexible: bool, nullable: bool
) -> WriteFn:
    if isinstance(t, Primitive):
        return t.writer(flexible, nullable)
    if isinstance(t, Array):
        return _array_writer(_type_writer(t.element, version, flexible, False), flexible, nullable)
    write = t.codec(version, flexible).write

    def write_struct(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null struct in a non-nullable field")
            w.int8(-1)
            return
        if nullable:
            w.int8(1)
        write(w, v)

    return write_struct


def _array_reader(
    read_element: ReadFn, flexible: bool, nullable: bool, element_size: int
) -> ReadFn:
    """Reads an array whose elements take at least ``element_size`` bytes each: a count
    that the bytes left cannot honestly hold is refused before anything is allocated."""

    def read(r: Reader) -> list[Any] | None:
        n = r.length(flexible, "array")
        if n < 0:
            if nullable:
                return None
            raise MalformedMessageError("non-nullable array was null")
        if n * element_size > r.end - r.pos:
            raise TruncatedMessageError(
                f"array of {n} elements of at least {element_size} bytes at offset {r.pos} "
                f"exceeds the {r.end - r.pos} bytes that remain"
            )
        return [read_element(r) for _ in range(n)]

    return read


# The fewest bytes a value of each primitive takes on the wire (non-flexible,
# flexible): a null or empty string, bytes or records is its length prefix alone.
_PRIMITIVE_MIN_SIZES = {
    "int8": (1, 1),
    "int16": (2, 2),
    "int32": (4, 4),
    "int64": (8, 8),
    "uint16": (2, 2),
    "uint32": (4, 4),
    "float64": (8, 8),
    "bool": (1, 1),
    "uuid": (16, 16),
    "string": (2, 1),
    "bytes": (4, 1),
    "records": (4, 1),
}


def _min_size(t: Primitive | Array | Struct, version: int, flexible: bool, nullable: bool) -> int:
    """The fewest bytes a value of ``t`` takes at ``version`` (at least 1)."""
    if isinstance(t, Primitive):
        return _PRIMITIVE_MIN_SIZES[t.name][flexible]
    if isinstance(t, Array):
        return 1 if flexible else 4
    if nullable:
        return 1
    return t.codec(version, flexible).min_size


def _array_writer(write_element: WriteFn, flexible: bool, nullable: bool) -> WriteFn:
    def write(w: Writer, v: Sequence[Any] | None) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null array in a non-nullable field")
            w.length(-1, flexible)
            return
        w.length(len(v), flexible)
        for item in v:
            write_element(w, item)

    return write


_ENCODE_FAILURES = (_struct.error, TypeError, ValueError, AttributeError, OverflowError)

# Fixed-width primitives that the generated codecs read and write in runs,
# one struct.unpack_from / pack per run of consecutive fields.
_FIXED_FORMATS = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint16": "H",
    "uint32": "I",
    "float64": "d",
    "bool": "?",
}


class _StructCodec:
    """Reader and writer of one struct at one version.

    ``read(reader)`` and ``write(writer, obj)`` are straight-line functions
    generated from the field list: consecutive fixed-width fields become one
    ``struct`` call, other fields call their type's reader or writer.
    ``_read_slow`` / ``_write_slow`` do the same field by field; they are
    the reference the generated code must match, and ``write`` falls back
    to ``_write_slow`` on failure to name the field at fault.
    """

    __slots__ = (
        "name",
        "cls",
        "flexible",
        "inline",
        "defaults",
        "factories",
        "tagged",
        "tagged_by_tag",
        "read",
        "write",
        "min_size",
    )

    def __init__(self, struct: Struct, version: int, flexible: bool):
        self.name = struct.name
        self.cls = struct.cls
        self.flexible = flexible
        inline: list[tuple[str, ReadFn, WriteFn, str | None]] = []
        tagged: list[tuple[int, str, ReadFn, WriteFn, Any]] = []
        defaults: list[tuple[str, Any]] = []
        factories: list[tuple[str, Any]] = []
        for f in struct.fields:
            present = version in f.versions
            is_tagged = f.tag is not None
            if present and is_tagged and not flexible:
                raise ValueError(f"{struct.name}.{f.name}: tagged field in a non-flexible version")
            if present:
                nullable = version in f.nullable
                rd = _type_reader(f.type, version, flexible, nullable)
                wr = _type_writer(f.type, version, flexible, nullable)
                if f.tag is not None:
                    tagged.append((f.tag, f.name, rd, wr, f.default))
                else:
                    fmt = _FIXED_FORMATS.get(f.type.name) if isinstance(f.type, Primitive) else None
                    inline.append((f.name, rd, wr, fmt))
            if not present or is_tagged:
                if f.has_mutable_default():
                    factories.append((f.name, _factory(f)))
                else:
                    defaults.append((f.name, f.default))
        tagged.sort(key=lambda t: t[0])
        self.min_size = max(
            1,
            sum(
                _min_size(f.type, version, flexible, version in f.nullable)
                for f in struct.fields
                if version in f.versions and f.tag is None
            )
            + (1 if flexible else 0),
        )
        self.inline = tuple(inline)
        self.tagged = tuple(tagged)
        self.tagged_by_tag = {t[0]: (t[1], t[2]) for t in tagged}
        self.defaults = tuple(defaults)
        self.factories = tuple(factories)
        self.read, self.write = self._generate()

    # generated fast path ---------------------------------------------------

    def _generate(self) -> tuple[ReadFn, WriteFn]:
        ns: dict[str, Any] = {
            "_new": object.__new__,
            "_cls": self.cls,
            "_read_tags": self._read_tags,
            "_write_tags": self._write_tags,
            "_write_slow": self._write_slow,
            "_Writer": Writer,
            "_FAILURES": (EncodeError, *_ENCODE_FAILURES),
            "_EncodeError": EncodeError,
            "_no_tags": NO_TAGS,
        }
        rd = ["def read(r):", "    obj = _new(_cls)"]
        wr = ["def write(w, obj):", "    try:"]
        for i, (name, value) in enumerate(self.defaults):
            ns[f"_d{i}"] = value
            rd.append(f"    obj.{name} = _d{i}")
        for i, (name, factory) in enumerate(self.factories):
            ns[f"_f{i}"] = factory
            rd.append(f"    obj.{name} = _f{i}()")
        run: list[tuple[str, str]] = []

        def flush() -> None:
            if not run:
                return
            k = len([key for key in ns if key.startswith("_run")])
            packer = _struct.Struct(">" + "".join(fmt for _, fmt in run))
            ns[f"_run{k}"] = packer
            targets = ", ".join(f"obj.{name}" for name, _ in run)
            rd.append(f"    p = r.advance({packer.size})")
            rd.append(f"    {targets}, = _run{k}.unpack_from(r.buf, p)")
            wr.append(f"        w.buf += _run{k}.pack({targets})")
            run.clear()

        for i, (name, read_fn, write_fn, fmt) in enumerate(self.inline):
            if fmt is not None:
                run.append((name, fmt))
                continue
            flush()
            ns[f"_rd{i}"], ns[f"_wr{i}"] = read_fn, write_fn
            rd.append(f"    obj.{name} = _rd{i}(r)")
            wr.append(f"        _wr{i}(w, obj.{name})")
        flush()
        if self.flexible:
            rd.append("    _read_tags(r, obj)")
            wr.append("        _write_tags(w, obj)")
        else:
            rd.append("    obj.unknown_tagged_fields = _no_tags")
            wr.append("        pass")
        rd.append("    return obj")
        wr += [
            "    except _FAILURES as exc:",
            "        _write_slow(_Writer(), obj)",  # raises the detailed EncodeError
            "        raise _EncodeError(f'{exc}') from None",
        ]
        exec("\n".join(rd) + "\n\n" + "\n".join(wr), ns)  # noqa: S102 - source built above
        return ns["read"], ns["write"]

    def _read_tags(self, r: Reader, obj: Any) -> None:
        pos = r.pos
        if pos < r.end and r.buf[pos] == 0:  # no tagged fields: the common case
            r.pos = pos + 1
            obj.unknown_tagged_fields = NO_TAGS
            return
        unknown: dict[int, bytes] = {}
        for tag, sub in r.tagged_fields():
            known = self.tagged_by_tag.get(tag)
            if known is None:
                unknown[tag] = bytes(sub.buf[sub.pos : sub.end])
                continue
            name, rd = known
            setattr(obj, name, rd(sub))
            if sub.remaining():
                raise MalformedMessageError(
                    f"{self.name}.{name}: tagged field {tag} has {sub.remaining()} trailing bytes"
                )
        obj.unknown_tagged_fields = unknown if unknown else NO_TAGS

    def _write_tags(self, w: Writer, obj: Any) -> None:
        if not self.tagged and not obj.unknown_tagged_fields:
            w.buf.append(0)  # an empty tagged-field section
            return
        fields: list[tuple[int, bytes]] = []
        for tag, name, _, wr, default in self.tagged:
            value = getattr(obj, name)
            if value == default:
                continue
            sub = Writer()
            try:
                wr(sub, value)
                fields.append((tag, sub.getvalue()))
            except EncodeError as exc:
                raise EncodeError(f"{name}: {exc}") from None
        unknown = obj.unknown_tagged_fields
        if unknown:
            known = {t for t, _ in fields} | set(self.tagged_by_tag)
            fields.extend((t, bytes(v)) for t, v in unknown.items() if t not in known)
            fields.sort(key=lambda t: t[0])
        w.unsigned_varint(len(fields))
        for tag, data in fields:
            w.unsigned_varint(tag)
            w.unsigned_varint(len(data))
            w.buf += data

    # reference path --------------------------------------------------------

    def _read_slow(self, r: Reader) -> Any:
        obj: Any = object.__new__(self.cls)
        for name, value in self.defaults:
            setattr(obj, name, value)
        for name, factory in self.factories:
            setattr(obj, name, factory())
        for name, rd, _, _ in self.inline:
            setattr(obj, name, rd(r))
        if self.flexible:
            self._read_tags(r, obj)
        else:
            obj.unknown_tagged_fields = NO_TAGS
        return obj

    def _write_slow(self, w: Writer, obj: Any) -> None:
        name = "?"
        try:
            for name, _, wr, _ in self.inline:
                wr(w, getattr(obj, name))
            if self.flexible:
                name = "<tagged fields>"
                self._write_tags(w, obj)
        except EncodeError as exc:
            raise EncodeError(f"{self.name}.{name}: {exc}") from None
        except _ENCODE_FAILURES as exc:
            raise EncodeError(f"{self.name}.{name}: {type(exc).__name__}: {exc}") from None


# --------------------------------------------------------------------------
# Top-level messages


class Message(StructValue):
    """Base of request and response classes built by :func:`message`."""

    __slots__ = ()
    API_KEY: ClassVar[ApiKey]
    KIND: ClassVar[str]

    @classmethod
    def check_version(cls, version: int) -> None:
        if not cls.API_KEY.min_version <= version <= cls.API_KEY.max_version:
            raise UnsupportedApiVersionError(int(cls.API_KEY), version)

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.API_KEY.is_flexible(version)

    @classmethod
    def read(cls, r: Reader, version: int) -> Message:
        """Decode from ``r``; bytes after the message are left unread."""
        cls.check_version(version)
        msg: Message = cls.SCHEMA.codec(version, cls.is_flexible(version)).read(r)
        return msg

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Message:
        """Decode a message body (no size prefix, no header)."""
        return cls.read(Reader(data), version)

    def write(self, w: Writer, version: int) -> None:
        self.check_version(version)
        self.SCHEMA.codec(version, self.is_flexible(version)).write(w, self)

    def encode(self, version: int) -> bytes:
        """The message body (no size prefix, no header) as bytes."""
        w = Writer()
        self.write(w, version)
        return w.getvalue()


def message(api_key: ApiKey, kind: str, fields: Sequence[Field]) -> type[Message]:
    """Build the class of ``api_key``'s request or response (``kind``).

    Versions and flexible versions come from ``api_key``.  Every nested
    struct's class is reachable as an attribute of the result.
    """
    if kind not in ("request", "response"):
        raise ValueError(f"kind must be 'request' or 'response', not {kind!r}")
    name = api_key.api_name + kind.capitalize()
    schema = Struct(name, fields, base=Message)
    cls = cast("type[Message]", schema.cls)  # the struct's class derives from its base
    cls.API_KEY = api_key
    cls.KIND = kind
    for nested in schema.nested():
        if hasattr(cls, nested.name):
            raise ValueError(f"{name}: struct name {nested.name} clashes with an attribute")
        setattr(cls, nested.name, nested.cls)
    _check_tags(schema, api_key)
    return cls


def _check_tags(struct: Struct, api_key: ApiKey) -> None:
    """Tagged fields may only exist in flexible versions."""
    first = api_key.first_flexible
    for s in [struct, *struct.nested()]:
        for f in s.fields:
            if f.tag is not None and (first is None or f.versions.low < first):
                raise ValueError(f"{s.name}.{f.name}: tagged before the first flexible version")
