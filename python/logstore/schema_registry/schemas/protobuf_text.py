"""`.proto` text printed from proto-schema-parser's syntax tree: its generator, with what a
registry needs of it made exact, so that printing a parsed print gives the same text.

- String literals are printed as written: the parser keeps them with their escapes, so
  escaping them again would add a backslash at every round.
- A group keeps its label (`optional group G = 4 { ... }`: proto2 requires it) and its
  nested types.
- Enum values and map fields keep their options (`B = 1 [deprecated = true];`).
"""

from __future__ import annotations

from proto_schema_parser import ast
from proto_schema_parser.generator import Generator


class ProtoPrinter(Generator):
    def _escape_string(self, value: str) -> str:
        return value

    def _options(self, options: list[ast.Option], indent_level: int) -> str:
        if not options:
            return ""
        printed = ", ".join(
            f"{o.name} = {self._generate_option_value(o.value, indent_level, inline=True)}"
            for o in options
        )
        return f" [{printed}]"

    def _generate_map_field(self, map_field: ast.MapField, indent_level: int = 0) -> str:
        return (
            f"{'  ' * indent_level}map<{map_field.key_type}, {map_field.value_type}> "
            f"{map_field.name} = {map_field.number}"
            f"{self._options(map_field.options, indent_level)};"
        )

    def _generate_group(self, group: ast.Group, indent_level: int = 0) -> str:
        body: str = self._generate_message(
            ast.Message(name=group.name, elements=group.elements), indent_level
        )
        label = f"{group.cardinality.value.lower()} " if group.cardinality else ""
        head = f"{'  ' * indent_level}{label}group {group.name} = {group.number} {{"
        return head + body[body.index("\n") :] if "\n" in body else head + "}"

    def _generate_enum(self, enum: ast.Enum, indent_level: int = 0) -> str:
        pad = "  " * (indent_level + 1)
        lines = [f"{'  ' * indent_level}enum {enum.name} {{"]
        for element in enum.elements:
            if isinstance(element, ast.EnumValue):
                options = self._options(element.options, indent_level + 1)
                lines.append(f"{pad}{element.name} = {element.number}{options};")
            elif isinstance(element, ast.EnumReserved):
                lines.append(self._generate_enum_reserved(element, indent_level + 1))
            elif isinstance(element, ast.Option):
                lines.append(self._generate_option(element, indent_level + 1))
            elif isinstance(element, ast.Comment):
                if element.inline:
                    lines[-1] = f"{lines[-1]} {element.text}"
                else:
                    lines.append(self._generate_comment(element, indent_level + 1))
        lines.append(f"{'  ' * indent_level}}}")
        return "\n".join(lines)


def print_proto(tree: ast.File) -> str:
    text: str = ProtoPrinter().generate(tree)
    return text.rstrip("\n") + "\n"
