"""Confluent's JSON Schema compatibility rules: the differences between an original (old)
schema and its update (new), each a difference type at a JSON path (`#/properties/a`).

A change is backward compatible when every difference found is in `COMPATIBLE_CHANGES`
(the table below, Confluent's strict policy); the rest are the incompatibilities, printed
as Confluent prints them: `{errorType:"<TYPE>", description:"<text>'}` (its quotes).

Content models: an object is open when it allows any additional property
(`additionalProperties` absent or true, no `patternProperties`, `unevaluatedProperties`
absent or true), closed when `additionalProperties` is false, and partially open when a
schema covers the properties it does not name. Adding a property is safe against a closed
model; removing one is safe from an open one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from logstore.schema_registry.schemas.json_schema import JsonNode, Loader

# Difference type -> compatible (True) when the update reads what the original wrote.
# Everything not listed True is incompatible.
COMPATIBLE_CHANGES: frozenset[str] = frozenset(
    """
    ID_CHANGED DESCRIPTION_CHANGED TITLE_CHANGED DEFAULT_CHANGED SCHEMA_REMOVED TYPE_EXTENDED
    MAX_LENGTH_INCREASED MAX_LENGTH_REMOVED MIN_LENGTH_DECREASED MIN_LENGTH_REMOVED
    PATTERN_REMOVED MAXIMUM_INCREASED MAXIMUM_REMOVED MINIMUM_DECREASED MINIMUM_REMOVED
    EXCLUSIVE_MAXIMUM_INCREASED EXCLUSIVE_MAXIMUM_REMOVED EXCLUSIVE_MINIMUM_DECREASED
    EXCLUSIVE_MINIMUM_REMOVED MULTIPLE_OF_REDUCED MULTIPLE_OF_REMOVED
    REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED REQUIRED_ATTRIBUTE_REMOVED DEPENDENCY_ARRAY_NARROWED
    DEPENDENCY_ARRAY_REMOVED DEPENDENCY_SCHEMA_REMOVED MAX_PROPERTIES_INCREASED
    MAX_PROPERTIES_REMOVED MIN_PROPERTIES_DECREASED MIN_PROPERTIES_REMOVED
    ADDITIONAL_PROPERTIES_ADDED ADDITIONAL_PROPERTIES_EXTENDED UNEVALUATED_PROPERTIES_ADDED
    UNEVALUATED_PROPERTIES_EXTENDED PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL
    OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL
    PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    MAX_ITEMS_INCREASED MAX_ITEMS_REMOVED MIN_ITEMS_DECREASED MIN_ITEMS_REMOVED
    MAX_CONTAINS_INCREASED MAX_CONTAINS_REMOVED MIN_CONTAINS_DECREASED MIN_CONTAINS_REMOVED
    UNIQUE_ITEMS_REMOVED ADDITIONAL_ITEMS_ADDED ADDITIONAL_ITEMS_EXTENDED UNEVALUATED_ITEMS_ADDED
    UNEVALUATED_ITEMS_EXTENDED ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL
    ITEM_ADDED_TO_CLOSED_CONTENT_MODEL ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL
    ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL
    ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL ENUM_ARRAY_EXTENDED
    COMBINED_TYPE_EXTENDED PRODUCT_TYPE_NARROWED SUM_TYPE_EXTENDED NOT_TYPE_NARROWED
    """.split()
)

# Message templates by group of difference types (`{path}`; `%s` reader then writer).
_GROUPS: list[tuple[str, str]] = [
    (
        "MAXIMUM_ADDED MINIMUM_ADDED EXCLUSIVE_MAXIMUM_ADDED EXCLUSIVE_MINIMUM_ADDED "
        "MULTIPLE_OF_ADDED MAX_LENGTH_ADDED MIN_LENGTH_ADDED PATTERN_ADDED "
        "REQUIRED_ATTRIBUTE_ADDED "
        "MAX_PROPERTIES_ADDED MIN_PROPERTIES_ADDED DEPENDENCY_ARRAY_ADDED DEPENDENCY_SCHEMA_ADDED "
        "MAX_ITEMS_ADDED MIN_ITEMS_ADDED MAX_CONTAINS_ADDED MIN_CONTAINS_ADDED UNIQUE_ITEMS_ADDED "
        "ADDITIONAL_ITEMS_REMOVED ADDITIONAL_PROPERTIES_REMOVED UNEVALUATED_PROPERTIES_REMOVED "
        "UNEVALUATED_ITEMS_REMOVED",
        "The keyword at path '{path}' in the %s schema is not present in the %s schema",
    ),
    (
        "MIN_LENGTH_INCREASED MINIMUM_INCREASED EXCLUSIVE_MINIMUM_INCREASED "
        "MIN_PROPERTIES_INCREASED MULTIPLE_OF_EXPANDED MIN_ITEMS_INCREASED MIN_CONTAINS_INCREASED",
        "The value at path '{path}' in the %s schema is more than its value in the %s schema",
    ),
    (
        "MAX_LENGTH_DECREASED MAXIMUM_DECREASED MAX_ITEMS_DECREASED MAX_CONTAINS_DECREASED "
        "EXCLUSIVE_MAXIMUM_DECREASED MAX_PROPERTIES_DECREASED",
        "The value at path '{path}' in the %s schema is less than its value in the %s schema",
    ),
    (
        "PATTERN_CHANGED MULTIPLE_OF_CHANGED DEPENDENCY_ARRAY_CHANGED",
        "The value at path '{path}' is different between the %s and %s schema",
    ),
    (
        "ADDITIONAL_ITEMS_NARROWED ENUM_ARRAY_NARROWED SUM_TYPE_NARROWED "
        "ADDITIONAL_PROPERTIES_NARROWED UNEVALUATED_PROPERTIES_NARROWED UNEVALUATED_ITEMS_NARROWED",
        "An array or combined type at path '{path}' has fewer elements in the %s schema than "
        "the %s schema",
    ),
    (
        "DEPENDENCY_ARRAY_EXTENDED PRODUCT_TYPE_EXTENDED SUM_TYPE_EXTENDED NOT_TYPE_EXTENDED",
        "An array or combined type at path '{path}' has more elements in the %s schema than "
        "the %s schema",
    ),
    (
        "TYPE_CHANGED TYPE_NARROWED COMBINED_TYPE_CHANGED COMBINED_TYPE_SUBSCHEMAS_CHANGED "
        "ENUM_ARRAY_CHANGED",
        "A type at path '{path}' is different between the %s schema and the %s schema",
    ),
    (
        "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL "
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL "
        "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
        "The %s schema has an open content model and has a property or item at path '{path}' "
        "which is missing in the %s schema",
    ),
    (
        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "The %s schema has an unopen content model and has a required property at path "
        "'{path}' which is missing in the %s schema",
    ),
    (
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "The %s has a closed content model and is missing a property or item present at path "
        "'{path}' in the %s schema",
    ),
    (
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
        "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "A property or item is missing in the %s schema but present at path '{path}' in the "
        "%s schema and is not covered by its partially open content model",
    ),
    (
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL "
        "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "The %s schema has a property or item at path '{path}' which is missing in the %s "
        "schema and is not covered by its partially open content model",
    ),
]
DESCRIPTIONS: dict[str, str] = {t: text for types, text in _GROUPS for t in types.split()}


@dataclass(frozen=True)
class Difference:
    type: str
    path: str

    def message(self) -> str:
        description = DESCRIPTIONS.get(self.type, "").format(path=self.path)
        return f'{{errorType:"{self.type}", description:"{description}\'}}'


class _Context:
    def __init__(self, path: list[str], in_progress: set[tuple[int, int]]) -> None:
        self.path = path
        self.differences: list[Difference] = []
        self.in_progress = in_progress

    def sub(self) -> _Context:
        return _Context(list(self.path), self.in_progress)

    def add(self, kind: str, attribute: str | None = None) -> None:
        parts = [*self.path, attribute] if attribute else self.path
        self.differences.append(Difference(kind, "#/" + "/".join(parts)))

    @contextmanager
    def at(self, *parts: str) -> Iterator[None]:
        self.path.extend(parts)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts) :]

    def compatible(self) -> bool:
        return all(d.type in COMPATIBLE_CHANGES for d in self.differences)


def _raw(node: JsonNode) -> dict[str, Any]:
    return node.raw if isinstance(node.raw, dict) else {}


# Keywords a draft does not have (so its meta-schema leaves their values unchecked).
_NOT_IN_DRAFT: dict[str, frozenset[str]] = {
    "2020-12": frozenset({"additionalItems", "dependencies"}),
    "2019-09": frozenset({"prefixItems", "dependencies"}),
    "old": frozenset({"prefixItems", "unevaluatedProperties", "unevaluatedItems",
                      "dependentRequired", "dependentSchemas", "minContains", "maxContains"}),
}  # fmt: skip


def _dialect(node: JsonNode) -> str:
    doc = node.doc if isinstance(node.doc, dict) else {}
    uri = str(doc.get("$schema", ""))
    return "2020-12" if "2020-12" in uri else "2019-09" if "2019-09" in uri else "old"


def _keywords(node: JsonNode) -> dict[str, Any]:
    """The node's keywords its draft knows (and so its meta-schema checked)."""
    unknown = _NOT_IN_DRAFT[_dialect(node)]
    return {k: v for k, v in _raw(node).items() if k not in unknown}


class _Differ:
    def __init__(self, original: Loader, update: Loader) -> None:
        self.original = original
        self.update = update

    def compare(self, ctx: _Context, o: JsonNode | None, u: JsonNode | None) -> None:
        if o is None and u is None:
            return
        if o is None:
            ctx.add("SCHEMA_ADDED")
            return
        if u is None:
            ctx.add("SCHEMA_REMOVED")
            return
        key = (id(o), id(u))
        if key in ctx.in_progress:
            return  # a recursive pair already being compared: assumed compatible
        ctx.in_progress.add(key)
        try:
            self._types(ctx, o, u)
        finally:
            ctx.in_progress.discard(key)

    def _try(self, ctx: _Context, o: JsonNode, u: JsonNode) -> _Context | None:
        sub = ctx.sub()
        self.compare(sub, o, u)
        return sub if sub.compatible() else None

    def _types(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        if o.kind != "combined" and u.kind == "combined":
            if len(u.subschemas) == 1 or u.criterion in ("anyOf", "oneOf"):
                for s in u.subschemas:
                    sub = self._try(ctx, o, s)
                    if sub is not None:
                        ctx.differences.extend(sub.differences)
                        if len(u.subschemas) != 1:
                            ctx.add("SUM_TYPE_EXTENDED")
                        return
        elif o.kind == "combined" and u.kind != "combined":
            if len(o.subschemas) == 1 or o.criterion == "allOf":
                for s in o.subschemas:
                    sub = self._try(ctx, s, u)
                    if sub is not None:
                        ctx.differences.extend(sub.differences)
                        if len(o.subschemas) != 1:
                            ctx.add("PRODUCT_TYPE_NARROWED")
                        return
        if not _same_class(o, u):
            if o.kind == "false" or u.kind in ("empty", "true"):
                return
            if _raw(o).get("connect.type") == "bytes" == _raw(u).get("connect.type"):
                return
            ctx.add("TYPE_CHANGED")
            return
        ro, ru = _raw(o), _raw(u)
        for key, kind in (("$id", "ID_CHANGED"), ("title", "TITLE_CHANGED"),
                          ("description", "DESCRIPTION_CHANGED"),
                          ("default", "DEFAULT_CHANGED")):  # fmt: skip
            if ro.get(key) != ru.get(key):
                ctx.add(kind)
        getattr(self, "_" + o.kind, _nothing)(ctx, o, u)

    def _string(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        ro, ru = _keywords(o), _keywords(u)
        _bound(ctx, ro, ru, "maxLength", "MAX_LENGTH")
        _bound(ctx, ro, ru, "minLength", "MIN_LENGTH")
        po, pu = ro.get("pattern"), ru.get("pattern")
        if po is None and pu is not None:
            ctx.add("PATTERN_ADDED", "pattern")
        elif po is not None and pu is None:
            ctx.add("PATTERN_REMOVED", "pattern")
        elif po != pu:
            ctx.add("PATTERN_CHANGED", "pattern")

    def _number(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        ro, ru = _keywords(o), _keywords(u)
        _bound(ctx, ro, ru, "maximum", "MAXIMUM")
        _bound(ctx, ro, ru, "minimum", "MINIMUM")
        _bound(ctx, ro, ru, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM")
        _bound(ctx, ro, ru, "exclusiveMinimum", "EXCLUSIVE_MINIMUM")
        mo, mu = ro.get("multipleOf"), ru.get("multipleOf")
        if mo != mu:
            if mo is None:
                ctx.add("MULTIPLE_OF_ADDED", "multipleOf")
            elif mu is None:
                ctx.add("MULTIPLE_OF_REMOVED", "multipleOf")
            elif mu % mo == 0:
                ctx.add("MULTIPLE_OF_EXPANDED", "multipleOf")
            elif mo % mu == 0:
                ctx.add("MULTIPLE_OF_REDUCED", "multipleOf")
            else:
                ctx.add("MULTIPLE_OF_CHANGED", "multipleOf")
        if o.integer != u.integer:
            ctx.add("TYPE_EXTENDED" if o.integer else "TYPE_NARROWED")

    def _enum(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        eo, eu = _raw(o).get("enum"), _raw(u).get("enum")
        if not isinstance(eo, list) or not isinstance(eu, list):
            return
        so, su = {_key(v) for v in eo}, {_key(v) for v in eu}
        if so != su:
            if so <= su:
                ctx.add("ENUM_ARRAY_EXTENDED", "enum")
            elif su <= so:
                ctx.add("ENUM_ARRAY_NARROWED", "enum")
            else:
                ctx.add("ENUM_ARRAY_CHANGED", "enum")

    def _const(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        if _key(_raw(o)["const"]) != _key(_raw(u)["const"]):
            ctx.add("ENUM_ARRAY_CHANGED", "const")

    def _not(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        with ctx.at("not"):
            sub = ctx.sub()
            self.compare(
                sub,
                self.update.node(_raw(u)["not"], u.doc),
                self.original.node(_raw(o)["not"], o.doc),
            )
            ctx.add("NOT_TYPE_NARROWED" if sub.compatible() else "NOT_TYPE_EXTENDED")

    def _combined(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        single_o, single_u = len(o.subschemas) == 1, len(u.subschemas) == 1
        if o.criterion == u.criterion:
            criterion_change = None
        elif (
            u.criterion == "anyOf"
            or (single_o and single_u)
            or (single_o and u.criterion == "oneOf")
            or (single_u and o.criterion == "allOf")
        ):
            criterion_change = "COMBINED_TYPE_EXTENDED"
        else:
            criterion_change = "COMBINED_TYPE_CHANGED"
        if criterion_change:
            ctx.add(criterion_change)
        if criterion_change == "COMBINED_TYPE_CHANGED":
            return
        osubs = _distinct(o.subschemas)
        usubs = _distinct(u.subschemas)
        if len(osubs) < len(usubs):
            ctx.add("PRODUCT_TYPE_EXTENDED" if u.criterion == "allOf" else "SUM_TYPE_EXTENDED")
        elif len(osubs) > len(usubs):
            ctx.add("SUM_TYPE_NARROWED" if o.criterion != "allOf" else "PRODUCT_TYPE_NARROWED")
        edges: dict[int, dict[int, list[Difference]]] = {}
        for i, os_ in enumerate(osubs):
            with ctx.at(f"{o.criterion}/{i}"):
                for j, us in enumerate(usubs):
                    sub = self._try(ctx, os_, us)
                    if sub is not None:
                        edges.setdefault(i, {})[j] = sub.differences
        matching = _max_matching(edges)
        for i, j in sorted(matching.items()):
            ctx.differences.extend(edges[i][j])
        if len(matching) < min(len(osubs), len(usubs)):
            ctx.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")

    def _object(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        ro, ru = _keywords(o), _keywords(u)
        po, pu = _props(ro), _props(ru)
        req_o, req_u = set(ro.get("required", ())), set(ru.get("required", ()))
        with ctx.at("required"):
            for name in po:
                if name in pu:
                    with ctx.at(name):
                        if name in req_o and name not in req_u:
                            ctx.add("REQUIRED_ATTRIBUTE_REMOVED")
                        elif name not in req_o and name in req_u:
                            has_default = isinstance(pu[name], dict) and "default" in pu[name]
                            ctx.add(
                                "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                                if has_default
                                else "REQUIRED_ATTRIBUTE_ADDED"
                            )
        with ctx.at("properties"):
            for name in sorted(set(po) | set(pu)):
                with ctx.at(name):
                    self._property(ctx, o, u, name, req_u)
        with ctx.at("dependencies"):
            do, du = _dependencies(ro), _dependencies(ru)
            for name in sorted(set(do) | set(du)):
                with ctx.at(name):
                    a, b = do.get(name), du.get(name)
                    if b is None:
                        ctx.add("DEPENDENCY_ARRAY_REMOVED")
                    elif a is None:
                        ctx.add("DEPENDENCY_ARRAY_ADDED")
                    elif a != b:
                        ctx.add(
                            "DEPENDENCY_ARRAY_EXTENDED"
                            if a <= b
                            else "DEPENDENCY_ARRAY_NARROWED"
                            if b <= a
                            else "DEPENDENCY_ARRAY_CHANGED"
                        )
            so, su = _schema_dependencies(ro), _schema_dependencies(ru)
            for name in sorted(set(so) | set(su)):
                with ctx.at(name):
                    if name not in su:
                        ctx.add("DEPENDENCY_SCHEMA_REMOVED")
                    elif name not in so:
                        ctx.add("DEPENDENCY_SCHEMA_ADDED")
                    else:
                        self.compare(
                            ctx,
                            self.original.node(so[name], o.doc),
                            self.update.node(su[name], u.doc),
                        )
        with ctx.at("additionalProperties"):
            ao, au = ro.get("additionalProperties", True), ru.get("additionalProperties", True)
            permits_o, permits_u = ao is not False, au is not False
            schema_o = ao if isinstance(ao, dict) else None
            schema_u = au if isinstance(au, dict) else None
            if permits_o != permits_u:
                ctx.add(
                    "ADDITIONAL_PROPERTIES_ADDED" if permits_u else "ADDITIONAL_PROPERTIES_REMOVED"
                )
            elif schema_o is None and schema_u is not None:
                ctx.add("ADDITIONAL_PROPERTIES_NARROWED")
            elif schema_u is None and schema_o is not None:
                ctx.add("ADDITIONAL_PROPERTIES_EXTENDED")
            elif schema_o is not None and schema_u is not None:
                self.compare(
                    ctx, self.original.node(schema_o, o.doc), self.update.node(schema_u, u.doc)
                )
        self._unevaluated(ctx, o, u, "unevaluatedProperties", "UNEVALUATED_PROPERTIES")
        _bound(ctx, ro, ru, "maxProperties", "MAX_PROPERTIES")
        _bound(ctx, ro, ru, "minProperties", "MIN_PROPERTIES")

    def _unevaluated(self, ctx: _Context, o: JsonNode, u: JsonNode, key: str, name: str) -> None:
        a, b = _keywords(o).get(key), _keywords(u).get(key)
        if a is None and b is None:
            return
        with ctx.at(key):
            if a is None:
                ctx.add(f"{name}_REMOVED" if b is False else f"{name}_NARROWED")
            elif b is None:
                ctx.add(f"{name}_ADDED" if a is False else f"{name}_EXTENDED")
            elif a is False and b is not False:
                ctx.add(f"{name}_ADDED")
            elif a is not False and b is False:
                ctx.add(f"{name}_REMOVED")
            elif a in (True, {}) and b not in (True, {}):
                ctx.add(f"{name}_NARROWED")
            elif a not in (True, {}) and b in (True, {}):
                ctx.add(f"{name}_EXTENDED")
            else:
                self.compare(ctx, self.original.node(a, o.doc), self.update.node(b, u.doc))

    def _property(
        self, ctx: _Context, o: JsonNode, u: JsonNode, name: str, required: set[str]
    ) -> None:
        ro, ru = _keywords(o), _keywords(u)
        po, pu = _props(ro), _props(ru)
        if name not in pu:
            if _is_open(ru):
                ctx.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
                return
            partial = _partial(ru, name)
            if partial is not None:
                sub = ctx.sub()
                self.compare(
                    sub, self.original.node(po[name], o.doc), self.update.node(partial, u.doc)
                )
                ctx.differences.extend(sub.differences)
                ctx.add(
                    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    if sub.compatible()
                    else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
            elif po[name] is False:
                ctx.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                ctx.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            return
        has_default = isinstance(pu[name], dict) and "default" in pu[name]
        if name not in po:
            if _is_open(ro):
                if self.update.node(pu[name], u.doc).kind in ("empty", "true"):
                    ctx.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
                elif name in required:
                    ctx.add(
                        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL"
                        if has_default
                        else "REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                    )
                else:
                    ctx.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
                return
            partial = _partial(ro, name)
            if partial is not None:
                sub = ctx.sub()
                self.compare(
                    sub, self.original.node(partial, o.doc), self.update.node(pu[name], u.doc)
                )
                ctx.differences.extend(sub.differences)
                ctx.add(
                    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    if sub.compatible()
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
            if name in required:
                ctx.add(
                    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                    if has_default
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                )
            else:
                ctx.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
            return
        self.compare(ctx, self.original.node(po[name], o.doc), self.update.node(pu[name], u.doc))

    def _array(self, ctx: _Context, o: JsonNode, u: JsonNode) -> None:
        ro, ru = _keywords(o), _keywords(u)
        io, iu = _all_items(o), _all_items(u)
        with ctx.at("items"):
            self.compare(
                ctx,
                None if io is None else self.original.node(io, o.doc),
                None if iu is None else self.update.node(iu, u.doc),
            )
        lo, lu = _tuple_items(o), _tuple_items(u)
        for i in range(min(len(lo), len(lu))):
            with ctx.at(f"items/{i}"):
                self.compare(ctx, self.original.node(lo[i], o.doc), self.update.node(lu[i], u.doc))
        for i in range(len(lu), len(lo)):
            with ctx.at(f"items/{i}"):
                partial = _additional_items(u)
                if partial is True or partial == {}:
                    ctx.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
                elif isinstance(partial, dict):
                    sub = ctx.sub()
                    self.compare(
                        sub, self.original.node(lo[i], o.doc), self.update.node(partial, u.doc)
                    )
                    ctx.differences.extend(sub.differences)
                    ctx.add(
                        "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        if sub.compatible()
                        else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    )
                elif lo[i] is False:
                    ctx.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
                else:
                    ctx.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        for i in range(len(lo), len(lu)):
            with ctx.at(f"items/{i}"):
                partial = _additional_items(o)
                if partial is False:
                    ctx.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
                elif isinstance(partial, dict) and partial:
                    sub = ctx.sub()
                    self.compare(
                        sub, self.original.node(partial, o.doc), self.update.node(lu[i], u.doc)
                    )
                    ctx.differences.extend(sub.differences)
                    ctx.add(
                        "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                        if sub.compatible()
                        else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    )
                elif self.update.node(lu[i], u.doc).kind in ("empty", "true"):
                    ctx.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
                else:
                    ctx.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
        with ctx.at("additionalItems"):
            ao, au = _additional_items(o), _additional_items(u)
            if (ao is not False) != (au is not False):
                ctx.add("ADDITIONAL_ITEMS_REMOVED" if ao is not False else "ADDITIONAL_ITEMS_ADDED")
            elif not isinstance(ao, dict) and isinstance(au, dict):
                ctx.add("ADDITIONAL_ITEMS_NARROWED")
            elif isinstance(ao, dict) and not isinstance(au, dict):
                ctx.add("ADDITIONAL_ITEMS_EXTENDED")
            elif isinstance(ao, dict) and isinstance(au, dict):
                self.compare(ctx, self.original.node(ao, o.doc), self.update.node(au, u.doc))
        _bound(ctx, ro, ru, "maxItems", "MAX_ITEMS")
        _bound(ctx, ro, ru, "minItems", "MIN_ITEMS")
        if bool(ro.get("uniqueItems")) != bool(ru.get("uniqueItems")):
            ctx.add("UNIQUE_ITEMS_REMOVED" if ro.get("uniqueItems") else "UNIQUE_ITEMS_ADDED",
                    "uniqueItems")  # fmt: skip
        _bound(ctx, ro, ru, "maxContains", "MAX_CONTAINS")
        _bound(ctx, ro, ru, "minContains", "MIN_CONTAINS")
        if not _is_2020(o) or "prefixItems" not in ro:
            self._unevaluated(ctx, o, u, "unevaluatedItems", "UNEVALUATED_ITEMS")


def _nothing(ctx: _Context, o: JsonNode, u: JsonNode) -> None:
    """Types with nothing to compare beyond their class (boolean, null, true, false, empty)."""


def _same_class(o: JsonNode, u: JsonNode) -> bool:
    return o.kind == u.kind


def _bound(ctx: _Context, ro: dict[str, Any], ru: dict[str, Any], key: str, name: str) -> None:
    a, b = ro.get(key), ru.get(key)
    if isinstance(a, bool) or isinstance(b, bool):  # draft 4's boolean exclusive bounds
        a, b = (None if isinstance(a, bool) else a), (None if isinstance(b, bool) else b)
    if a == b:
        return
    if a is None:
        ctx.add(f"{name}_ADDED", key)
    elif b is None:
        ctx.add(f"{name}_REMOVED", key)
    elif a < b:
        ctx.add(f"{name}_INCREASED", key)
    else:
        ctx.add(f"{name}_DECREASED", key)


def _key(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def _distinct(nodes: list[JsonNode]) -> list[JsonNode]:
    out: list[JsonNode] = []
    seen: set[str] = set()
    for n in nodes:
        k = _key(n.raw) + "|" + n.kind + "|" + n.criterion
        if k not in seen:
            seen.add(k)
            out.append(n)
    return out


def _max_matching(edges: dict[int, dict[int, list[Difference]]]) -> dict[int, int]:
    """A maximum bipartite matching original index -> update index (augmenting paths)."""
    match_u: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in edges.get(i, {}):
            if j in seen:
                continue
            seen.add(j)
            if j not in match_u or augment(match_u[j], seen):
                match_u[j] = i
                return True
        return False

    for i in sorted(edges):
        augment(i, set())
    return {i: j for j, i in match_u.items()}


def _props(raw: dict[str, Any]) -> dict[str, Any]:
    props = raw.get("properties")
    return props if isinstance(props, dict) else {}


def _dependencies(raw: dict[str, Any]) -> dict[str, frozenset[str]]:
    deps = dict(raw.get("dependencies") or {})
    deps.update(raw.get("dependentRequired") or {})
    return {
        k: frozenset(v)
        for k, v in deps.items()
        if isinstance(v, list) and all(isinstance(x, str) for x in v)
    }


def _schema_dependencies(raw: dict[str, Any]) -> dict[str, Any]:
    deps = dict(raw.get("dependencies") or {})
    deps.update(raw.get("dependentSchemas") or {})
    return {k: v for k, v in deps.items() if isinstance(v, (dict, bool))}


def _is_open(raw: dict[str, Any]) -> bool:
    additional = raw.get("additionalProperties", True)
    if additional is not True or raw.get("patternProperties"):
        return False
    return raw.get("unevaluatedProperties", True) in (True, {})


def _partial(raw: dict[str, Any], name: str) -> Any:
    for pattern, schema in (raw.get("patternProperties") or {}).items():
        try:
            if re.search(pattern, name):
                return schema
        except re.error:
            continue
    additional = raw.get("additionalProperties")
    if isinstance(additional, dict):
        return additional
    if additional is None:
        uneval = raw.get("unevaluatedProperties")
        if isinstance(uneval, dict) and uneval:
            return uneval
    return None


def _is_2020(node: JsonNode) -> bool:
    return _dialect(node) == "2020-12"


def _all_items(node: JsonNode) -> Any:
    raw = _keywords(node)
    items = raw.get("items")
    if _is_2020(node) and ("prefixItems" in raw or isinstance(items, bool)):
        return None
    return items if isinstance(items, (dict, bool)) else None


def _tuple_items(node: JsonNode) -> list[Any]:
    raw = _keywords(node)
    items = raw.get("prefixItems") if _is_2020(node) else raw.get("items")
    return items if isinstance(items, list) else []


def _additional_items(node: JsonNode) -> Any:
    """What items past the tuple must match: True (any), False (none) or a schema."""
    raw = _keywords(node)
    if _is_2020(node) and ("prefixItems" in raw or isinstance(raw.get("items"), bool)):
        if "items" in raw:
            return raw["items"]
    elif "additionalItems" in raw:
        return raw["additionalItems"]
    return raw.get("unevaluatedItems", True)


def differences(
    original: JsonNode, original_loader: Loader, update: JsonNode, update_loader: Loader
) -> list[Difference]:
    ctx = _Context([], set())
    _Differ(original_loader, update_loader).compare(ctx, original, update)
    return ctx.differences


def backward_differences(
    original: JsonNode, original_loader: Loader, update: JsonNode, update_loader: Loader
) -> list[str]:
    """Confluent's messages for the incompatible differences from `original` to `update`."""
    found = differences(original, original_loader, update, update_loader)
    return [d.message() for d in found if d.type not in COMPATIBLE_CHANGES]
