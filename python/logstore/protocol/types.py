"""Primitive wire types of the Kafka protocol: a bounded reader, a writer,
and the type descriptors that schemas are built from.

All integers are big-endian two's complement.  Formats:

=====================  ====================================================
int8/16/32/64          1/2/4/8 bytes, signed
uint16, uint32         2/4 bytes, unsigned
float64                8 bytes, IEEE 754 binary64
bool                   int8; 0 is false, any other value true
uuid                   16 bytes; the all-zero uuid means "none"
unsigned varint        7 bits a byte, low group first, high bit = "more";
                       at most 5 bytes, value < 2**32
varint / varlong       zigzag ((n << 1) ^ (n >> 31|63)) then unsigned varint;
                       at most 5 / 10 bytes (used inside record batches)
string                 int16 length, then UTF-8; length -1 = null
compact string         unsigned varint length+1, then UTF-8; 0 = null
bytes                  int32 length, then bytes; -1 = null
compact bytes          unsigned varint length+1, then bytes; 0 = null
records                as (compact) nullable bytes; the content is one or
                       more RecordBatches, kept as a raw ``memoryview``
array                  int32 count, then elements; -1 = null
compact array          unsigned varint count+1, then elements; 0 = null
tagged fields          unsigned varint count, then per field: unsigned
                       varint tag, unsigned varint size, ``size`` bytes
=====================  ====================================================

"Compact" forms are used by flexible versions.  :class:`Reader` checks every
length against the bytes that remain before using it, so a bogus length
raises :class:`~logstore.protocol.errors.MalformedMessageError` instead of
allocating memory or reading past the message.  A count of array elements
must not exceed the bytes that remain either (each element takes at least
one byte in practice; Kafka applies the same rule).
"""

from __future__ import annotations

import builtins
import struct
import uuid
from collections.abc import Callable
from typing import Any

from logstore.protocol.errors import EncodeError, MalformedMessageError, TruncatedMessageError

__all__ = [
    "BOOL",
    "BYTES",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "RECORDS",
    "STRING",
    "UINT16",
    "UINT32",
    "UUID",
    "ZERO_UUID",
    "DeferredRecords",
    "Primitive",
    "Reader",
    "Writer",
]

ZERO_UUID = uuid.UUID(int=0)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

_INT16_MAX = 0x7FFF
_INT32_MAX = 0x7FFFFFFF


class Reader:
    """Reads primitives from ``buf[pos:end]``.

    ``buf`` is a memoryview; slices returned for records share its memory,
    so the underlying object must not change while they are in use (the
    frame decoder hands over immutable ``bytes``).
    """

    __slots__ = ("buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None):
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.ndim != 1 or buf.itemsize != 1:
            buf = buf.cast("B")
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def remaining(self) -> int:
        return self.end - self.pos

    def advance(self, n: int) -> int:
        """Reserve ``n`` bytes; return where they start."""
        p = self.pos
        if n > self.end - p:
            raise TruncatedMessageError(f"need {n} bytes at offset {p}, only {self.end - p} remain")
        self.pos = p + n
        return p

    # fixed-size -------------------------------------------------------

    def int8(self) -> int:
        value: int = _I8.unpack_from(self.buf, self.advance(1))[0]
        return value

    def int16(self) -> int:
        value: int = _I16.unpack_from(self.buf, self.advance(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack_from(self.buf, self.advance(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack_from(self.buf, self.advance(8))[0]
        return value

    def uint16(self) -> int:
        value: int = _U16.unpack_from(self.buf, self.advance(2))[0]
        return value

    def uint32(self) -> int:
        value: int = _U32.unpack_from(self.buf, self.advance(4))[0]
        return value

    def float64(self) -> float:
        value: float = _F64.unpack_from(self.buf, self.advance(8))[0]
        return value

    def bool(self) -> bool:
        return self.buf[self.advance(1)] != 0

    def uuid(self) -> uuid.UUID:
        p = self.advance(16)
        value = int.from_bytes(self.buf[p : p + 16], "big")
        return ZERO_UUID if value == 0 else uuid.UUID(int=value)

    # variable-length integers -----------------------------------------

    def _unsigned(self, max_bytes: int) -> int:
        buf, p, end = self.buf, self.pos, self.end
        if p < end and buf[p] < 0x80:  # one byte: most lengths and tag counts
            self.pos = p + 1
            return buf[p]
        value = 0
        shift = 0
        for i in range(max_bytes):
            if p + i >= end:
                raise TruncatedMessageError(f"varint at offset {self.pos} is cut off")
            b = buf[p + i]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = p + i + 1
                return value
            shift += 7
        raise MalformedMessageError(f"varint at offset {p} is longer than {max_bytes} bytes")

    def unsigned_varint(self) -> int:
        p = self.pos
        if p < self.end and self.buf[p] < 0x80:
            self.pos = p + 1
            return self.buf[p]
        value = self._unsigned(5)
        if value > 0xFFFFFFFF:
            raise MalformedMessageError(f"unsigned varint {value} does not fit in 32 bits")
        return value

    def varint(self) -> int:
        value = self.unsigned_varint()
        return (value >> 1) ^ -(value & 1)

    def varlong(self) -> int:
        value = self._unsigned(10)
        if value > 0xFFFFFFFFFFFFFFFF:
            raise MalformedMessageError(f"varlong {value} does not fit in 64 bits")
        return (value >> 1) ^ -(value & 1)

    # lengths ----------------------------------------------------------

    def _check_length(self, n: int, what: str) -> int:
        if n > self.end - self.pos:
            raise TruncatedMessageError(
                f"{what} of length {n} at offset {self.pos} exceeds the "
                f"{self.end - self.pos} bytes that remain"
            )
        return n

    def length(self, flexible: builtins.bool, what: str) -> int:
        """A string/bytes/array length: ``-1`` means null.

        Non-flexible strings use int16; everything else int32 or compact.
        The returned length is at most :meth:`remaining`.
        """
        if flexible:
            n = self.unsigned_varint() - 1
        else:
            n = self.int32()
            if n < -1:
                raise MalformedMessageError(f"negative {what} length {n}")
        if n < 0:
            return -1
        return self._check_length(n, what)

    def string_length(self, flexible: builtins.bool) -> int:
        if flexible:
            return self.length(True, "string")
        n = self.int16()
        if n < -1:
            raise MalformedMessageError(f"negative string length {n}")
        if n < 0:
            return -1
        return self._check_length(n, "string")

    def text(self, n: int) -> str:
        p = self.advance(n)
        try:
            return str(self.buf[p : p + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessageError(f"string at offset {p} is not valid UTF-8: {exc}") from None

    def view(self, n: int) -> memoryview:
        p = self.advance(n)
        return self.buf[p : p + n]

    def sub(self, n: int) -> Reader:
        """A reader over the next ``n`` bytes; this reader skips them."""
        p = self.advance(n)
        return Reader(self.buf, p, p + n)

    # tagged fields ----------------------------------------------------

    def tagged_fields(self) -> list[tuple[int, Reader]]:
        """The tagged-field section: ``(tag, reader over its value)`` pairs."""
        count = self.unsigned_varint()
        self._check_length(count, "tagged field count")
        fields = []
        for _ in range(count):
            tag = self.unsigned_varint()
            size = self.unsigned_varint()
            fields.append((tag, self.sub(size)))
        return fields


class DeferredRecords:
    """Stands for a records field whose bytes the caller sends itself.

    The encoder writes only the field's length prefix (``length``) and
    leaves this object in the chunk list where the bytes belong; the network
    layer then transfers ``length`` bytes described by ``source`` (for
    example a segment file and position, by ``sendfile(2)``).  ``source`` is
    opaque to the codec.
    """

    __slots__ = ("length", "source")

    def __init__(self, length: int, source: object = None):
        if length < 0:
            raise ValueError("length must be >= 0")
        self.length = length
        self.source = source

    def __len__(self) -> int:
        return self.length

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeferredRecords):
            return NotImplemented
        return self.length == other.length and self.source == other.source

    def __hash__(self) -> int:
        return hash((self.length, id(self.source)))

    def __repr__(self) -> str:
        return f"DeferredRecords(length={self.length}, source={self.source!r})"


class Writer:
    """Accumulates encoded bytes.

    Output is normally one ``bytes``; once :meth:`deferred` is called it is
    a list of chunks (``bytearray`` and :class:`DeferredRecords`) in wire
    order.
    """

    __slots__ = ("buf", "chunks")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chunks: list[bytearray | DeferredRecords] | None = None

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uint16(self, v: int) -> None:
        self.buf += _U16.pack(v)

    def uint32(self, v: int) -> None:
        self.buf += _U32.pack(v)

    def float64(self, v: float) -> None:
        self.buf += _F64.pack(v)

    def bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    def unsigned_varint(self, v: int) -> None:
        if 0 <= v < 0x80:
            self.buf.append(v)
            return
        if not 0 <= v <= 0xFFFFFFFF:
            raise EncodeError(f"unsigned varint {v} out of range")
        self._unsigned(v)

    def _unsigned(self, v: int) -> None:
        buf = self.buf
        while v > 0x7F:
            buf.append((v & 0x7F) | 0x80)
            v >>= 7
        buf.append(v)

    def varint(self, v: int) -> None:
        if not -(2**31) <= v < 2**31:
            raise EncodeError(f"varint {v} out of range")
        self._unsigned(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)

    def varlong(self, v: int) -> None:
        if not -(2**63) <= v < 2**63:
            raise EncodeError(f"varlong {v} out of range")
        self._unsigned(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def length(self, n: int, flexible: builtins.bool) -> None:
        """Array/bytes length; ``-1`` for null."""
        if flexible:
            self.unsigned_varint(n + 1)
        else:
            self.int32(n)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        self.buf += data

    def deferred(self, records: DeferredRecords) -> None:
        """Close the current chunk and leave ``records`` in the chunk list."""
        if self.chunks is None:
            self.chunks = []
        self.chunks.append(self.buf)
        self.chunks.append(records)
        self.buf = bytearray()

    def getvalue(self) -> bytes:
        if self.chunks is not None:
            raise EncodeError("message holds deferred records; use the chunked encoder")
        return bytes(self.buf)

    def getchunks(self) -> list[bytearray | DeferredRecords]:
        """Chunks in wire order; empty byte chunks are dropped."""
        chunks = [*(self.chunks or ()), self.buf]
        return [c for c in chunks if isinstance(c, DeferredRecords) or c]


ReadFn = Callable[[Reader], Any]
WriteFn = Callable[[Writer, Any], None]


class Primitive:
    """A primitive field type.

    ``reader(flexible, nullable)`` and ``writer(flexible, nullable)`` return
    the functions that read and write one value in the given encoding.
    ``default`` is the value of a field absent from a version.
    """

    __slots__ = ("name", "default", "_reader", "_writer")

    def __init__(
        self,
        name: str,
        default: Any,
        reader: Callable[[bool, bool], ReadFn],
        writer: Callable[[bool, bool], WriteFn],
    ):
        self.name = name
        self.default = default
        self._reader = reader
        self._writer = writer

    def reader(self, flexible: bool, nullable: bool) -> ReadFn:
        return self._reader(flexible, nullable)

    def writer(self, flexible: bool, nullable: bool) -> WriteFn:
        return self._writer(flexible, nullable)

    def __repr__(self) -> str:
        return self.name.upper()


def _fixed(name: str, default: Any, read: ReadFn, write: WriteFn) -> Primitive:
    return Primitive(name, default, lambda f, n: read, lambda f, n: write)


INT8 = _fixed("int8", 0, Reader.int8, Writer.int8)
INT16 = _fixed("int16", 0, Reader.int16, Writer.int16)
INT32 = _fixed("int32", 0, Reader.int32, Writer.int32)
INT64 = _fixed("int64", 0, Reader.int64, Writer.int64)
UINT16 = _fixed("uint16", 0, Reader.uint16, Writer.uint16)
UINT32 = _fixed("uint32", 0, Reader.uint32, Writer.uint32)
FLOAT64 = _fixed("float64", 0.0, Reader.float64, Writer.float64)
BOOL = _fixed("bool", False, Reader.bool, Writer.bool)
UUID = _fixed("uuid", ZERO_UUID, Reader.uuid, Writer.uuid)


def _null_error(what: str) -> MalformedMessageError:
    return MalformedMessageError(f"non-nullable {what} was null")


def _string_reader(flexible: bool, nullable: bool) -> ReadFn:
    def read(r: Reader) -> str | None:
        n = r.string_length(flexible)
        if n < 0:
            if nullable:
                return None
            raise _null_error("string")
        return r.text(n)

    return read


def _string_writer(flexible: bool, nullable: bool) -> WriteFn:
    def write(w: Writer, v: str | None) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null string in a non-nullable field")
            if flexible:
                w.buf.append(0)
            else:
                w.int16(-1)
            return
        data = v.encode("utf-8")
        if flexible:
            w.unsigned_varint(len(data) + 1)
        else:
            if len(data) > _INT16_MAX:
                raise EncodeError(f"string of {len(data)} bytes exceeds the int16 length limit")
            w.int16(len(data))
        w.buf += data

    return write


def _bytes_reader(flexible: bool, nullable: bool) -> ReadFn:
    def read(r: Reader) -> bytes | None:
        n = r.length(flexible, "bytes")
        if n < 0:
            if nullable:
                return None
            raise _null_error("bytes")
        return bytes(r.view(n))

    return read


def _records_reader(flexible: bool, nullable: bool) -> ReadFn:
    def read(r: Reader) -> memoryview | None:
        n = r.length(flexible, "records")
        if n < 0:
            if nullable:
                return None
            raise _null_error("records")
        return r.view(n)

    return read


def _bytes_writer(flexible: bool, nullable: bool) -> WriteFn:
    def write(w: Writer, v: bytes | bytearray | memoryview | DeferredRecords | None) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("null bytes in a non-nullable field")
            w.length(-1, flexible)
            return
        if isinstance(v, DeferredRecords):
            w.length(v.length, flexible)
            w.deferred(v)
            return
        n = v.nbytes if isinstance(v, memoryview) else len(v)
        if n > _INT32_MAX:
            raise EncodeError(f"value of {n} bytes exceeds the int32 length limit")
        w.length(n, flexible)
        w.buf += v

    return write


STRING = Primitive("string", "", _string_reader, _string_writer)
BYTES = Primitive("bytes", b"", _bytes_reader, _bytes_writer)
RECORDS = Primitive("records", None, _records_reader, _bytes_writer)
