"""Avro's schema resolution as a compatibility check: can a reader schema read data written
with a writer schema (BACKWARD: new reads old; FORWARD: old reads new; FULL: both)?

Each incompatibility found is reported as Confluent prints it:
`{errorType:'<TYPE>', description:'<text with %s for reader and writer>',
additionalInfo:'<detail>'}`, the path being Avro's location of the reader schema
(`/fields/1/type/items`, a union branch by its index in the writer union).
"""

from __future__ import annotations

from dataclasses import dataclass

from logstore.schema_registry.schemas.avro import PRIMITIVES, AvroNode

# Writer type -> the reader types that read it (Avro's promotions; every type reads itself).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"int", "long", "float", "double"}),
    "long": frozenset({"long", "float", "double"}),
    "float": frozenset({"float", "double"}),
    "string": frozenset({"string", "bytes"}),
    "bytes": frozenset({"bytes", "string"}),
}

# Confluent's description per error type; `{path}` and `{info}` are filled in, `%s` stays for
# the reader ("new"/"old") then the writer.
DESCRIPTIONS: dict[str, str] = {
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{path}' in the %s schema "
    "does not match with the %s schema",
    "TYPE_MISMATCH": "The type (path '{path}') of a field in the %s schema does not match "
    "with the %s schema",
    "NAME_MISMATCH": "The name of the schema has changed (path '{path}')",
    "MISSING_ENUM_SYMBOLS": "The %s schema is missing enum symbols '{info}' at path '{path}' "
    "in the %s schema",
    "MISSING_UNION_BRANCH": "The %s schema is missing a type inside a union field at path "
    "'{path}' in the %s schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{path}' in the %s "
    "schema has no default value and is missing in the %s schema",
}


@dataclass(frozen=True)
class Incompatibility:
    error_type: str
    path: str
    info: str

    def message(self) -> str:
        description = DESCRIPTIONS[self.error_type].format(path=self.path, info=self.info)
        return (
            f"{{errorType:'{self.error_type}', description:'{description}', "
            f"additionalInfo:'{self.info}'}}"
        )


def _type_name(node: AvroNode) -> str:
    return node.kind.upper()


class _Checker:
    def __init__(self) -> None:
        self.found: list[Incompatibility] = []
        # Pairs being checked (recursive records): assumed compatible while in progress.
        self.in_progress: set[tuple[int, int]] = set()

    def add(self, error_type: str, location: list[str], info: str) -> None:
        self.found.append(Incompatibility(error_type, "/" + "/".join(location), info))

    def check(self, reader: AvroNode, writer: AvroNode, location: list[str]) -> None:
        key = (id(reader), id(writer))
        if key in self.in_progress:
            return
        self.in_progress.add(key)
        try:
            self._check(reader, writer, location)
        finally:
            self.in_progress.discard(key)

    def _check(self, reader: AvroNode, writer: AvroNode, location: list[str]) -> None:
        r, w = reader.kind, writer.kind
        if r == w:
            if r in PRIMITIVES:
                return
            if r == "array":
                assert reader.items is not None and writer.items is not None
                self.check(reader.items, writer.items, [*location, "items"])
            elif r == "map":
                assert reader.values is not None and writer.values is not None
                self.check(reader.values, writer.values, [*location, "values"])
            elif r == "fixed":
                self._names(reader, writer, location)
                if reader.size != writer.size:
                    self.add(
                        "FIXED_SIZE_MISMATCH",
                        [*location, "size"],
                        f"expected: {writer.size}, found: {reader.size}",
                    )
            elif r == "enum":
                self._names(reader, writer, location)
                missing = sorted(set(writer.symbols) - set(reader.symbols))
                if missing and not (
                    reader.enum_default is not None and reader.enum_default in reader.symbols
                ):
                    self.add("MISSING_ENUM_SYMBOLS", [*location, "symbols"], _set(missing))
            elif r == "record":
                self._names(reader, writer, location)
                self._fields(reader, writer, location)
            else:  # union against union: every writer branch must be readable
                for i, branch in enumerate(writer.branches):
                    self.check(reader, branch, [*location, str(i)])
            return
        if w == "union":
            for i, branch in enumerate(writer.branches):
                self.check(reader, branch, [*location, str(i)])
            return
        if r == "union":
            for branch in reader.branches:
                probe = _Checker()
                probe.in_progress = set(self.in_progress)
                probe.check(branch, writer, location)
                if not probe.found:
                    return
            self.add(
                "MISSING_UNION_BRANCH",
                location,
                f"reader union lacking writer type: {_type_name(writer)}",
            )
            return
        if r in PROMOTIONS.get(w, frozenset()):
            return
        self.add(
            "TYPE_MISMATCH",
            location,
            f"reader type: {_type_name(reader)} not compatible with writer type: "
            f"{_type_name(writer)}",
        )

    def _names(self, reader: AvroNode, writer: AvroNode, location: list[str]) -> None:
        if reader.name == writer.name or writer.fullname in reader.aliases:
            return
        self.add("NAME_MISMATCH", [*location, "name"], f"expected: {writer.fullname}")

    def _fields(self, reader: AvroNode, writer: AvroNode, location: list[str]) -> None:
        by_name = {f.name: f for f in writer.fields}
        for pos, field in enumerate(reader.fields):
            written = by_name.get(field.name)
            if written is None:
                written = next((by_name[a] for a in field.aliases if a in by_name), None)
            if written is None:
                if not field.has_default:
                    self.add(
                        "READER_FIELD_MISSING_DEFAULT_VALUE",
                        [*location, "fields", str(pos)],
                        field.name,
                    )
                continue
            self.check(field.type, written.type, [*location, "fields", str(pos), "type"])


def _set(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


def incompatibilities(reader: AvroNode, writer: AvroNode) -> list[Incompatibility]:
    checker = _Checker()
    checker.check(reader, writer, [])
    return checker.found


def reader_writer_differences(reader: AvroNode, writer: AvroNode) -> list[str]:
    """Confluent's messages for every way `reader` fails to read `writer`'s data."""
    return [i.message() for i in incompatibilities(reader, writer)]
