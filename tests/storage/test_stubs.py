"""The type stubs (python/logstore/_native.pyi) and the native module agree, both ways."""

from __future__ import annotations

import ast
import builtins
import inspect
import sys
from pathlib import Path

import pytest

import logstore
from logstore import _native

PYI = Path(__file__).resolve().parents[2] / "python" / "logstore" / "_native.pyi"


def _stub_tree():
    return ast.parse(PYI.read_text())


def _public(name: str) -> bool:
    return not name.startswith("_")


def _stub_module_names():
    """name -> ast node for every runtime name the stub declares (not type aliases)."""
    out = {}
    for node in _stub_tree().body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and _public(node.name):
            out[node.name] = node
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and _public(node.target.id)
        ):
            out[node.target.id] = node
    return out


def _class_members(cls_node: ast.ClassDef):
    """name -> kind ('method', 'staticmethod', 'property', 'attribute') declared in a stub class."""
    out = {}
    for node in cls_node.body:
        if isinstance(node, ast.FunctionDef):
            decos = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
            if "property" in decos:
                out[node.name] = "property"
            elif "staticmethod" in decos:
                out[node.name] = "staticmethod"
            else:
                out[node.name] = "method"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = "attribute"
    return out


STUB = _stub_module_names()
STUB_CLASSES = {n: node for n, node in STUB.items() if isinstance(node, ast.ClassDef)}
STUB_FUNCS = {n: node for n, node in STUB.items() if isinstance(node, ast.FunctionDef)}


def test_stub_parses_and_is_not_empty():
    assert {"Log", "RecordBatch", "Record", "FileSlice", "encode_batch", "decode_batches"} <= set(
        STUB
    )


@pytest.mark.parametrize("name", sorted(STUB))
def test_stub_name_exists_in_native(name):
    assert hasattr(_native, name), f"{name} is in _native.pyi but not in logstore._native"
    node = STUB[name]
    obj = getattr(_native, name)
    if isinstance(node, ast.ClassDef):
        assert isinstance(obj, type), name
    elif isinstance(node, ast.FunctionDef):
        assert callable(obj), name


def test_native_names_are_in_stub():
    native_public = {n for n in dir(_native) if _public(n)}
    missing = native_public - set(STUB)
    assert not missing, (
        f"public names of logstore._native missing from _native.pyi: {sorted(missing)}"
    )


def test_logstore_reexports_native():
    for name in STUB:
        assert getattr(logstore, name, None) is getattr(_native, name), (
            f"logstore.{name} is not logstore._native.{name}"
        )


def test_compression_types_value():
    assert _native.COMPRESSION_TYPES == ("none", "gzip", "snappy", "lz4", "zstd")


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_class_bases_match(name):
    node = STUB_CLASSES[name]
    cls = getattr(_native, name)
    for base in node.bases:
        assert isinstance(base, ast.Name)
        base_cls = getattr(_native, base.id, None) or getattr(builtins, base.id, None)
        assert base_cls is not None, base.id
        assert issubclass(cls, base_cls), (name, base.id)


def _is_exception_class(node):
    return any(
        isinstance(b, ast.Name) and (b.id.endswith("Error") or b.id == "Exception")
        for b in node.bases
    )


@pytest.mark.parametrize("name", sorted(STUB_CLASSES))
def test_class_members_both_ways(name):
    node = STUB_CLASSES[name]
    cls = getattr(_native, name)
    declared = _class_members(node)
    for member, kind in declared.items():
        if member == "__buffer__" and sys.version_info < (3, 12):
            # The buffer protocol is a type slot; Python shows it as __buffer__ from 3.12.
            memoryview(cls(1)).release()
            continue
        assert hasattr(cls, member), f"{name}.{member} ({kind}) is in the stub but not on the class"
        raw = inspect.getattr_static(cls, member)
        if kind == "property":
            assert inspect.isdatadescriptor(raw), f"{name}.{member} should be a property"
        elif kind == "staticmethod":
            assert callable(getattr(cls, member)), f"{name}.{member} should be a static method"
            assert not inspect.isdatadescriptor(raw), f"{name}.{member} is a property"
        elif kind == "method":
            assert callable(getattr(cls, member)), f"{name}.{member} should be a method"
            assert not inspect.isdatadescriptor(raw) or inspect.ismethoddescriptor(raw), (
                f"{name}.{member} is a property"
            )
    if _is_exception_class(node):
        return
    inherited = set(dir(object))
    native_members = {m for m in dir(cls) if _public(m) and m not in inherited}
    extra = native_members - set(declared)
    assert not extra, f"{name} has public members missing from the stub: {sorted(extra)}"


def _stub_params(fn: ast.FunctionDef, drop_self: bool):
    a = fn.args
    pos = [p.arg for p in a.posonlyargs + a.args]
    if drop_self and pos and pos[0] in ("self", "cls"):
        pos = pos[1:]
    kwonly = [p.arg for p in a.kwonlyargs]
    return pos, kwonly


def _runtime_params(obj, drop_self: bool):
    sig = inspect.signature(obj)
    params = list(sig.parameters.values())
    if drop_self and params and params[0].name in ("self", "$self", "cls"):
        params = params[1:]
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kwonly = [p.name for p in params if p.kind == p.KEYWORD_ONLY]
    var = [p.kind for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return pos, kwonly, var


def _signature_cases():
    cases = []
    for name, fn in STUB_FUNCS.items():
        cases.append(pytest.param(name, None, fn, id=name))
    for cname, cnode in STUB_CLASSES.items():
        for node in cnode.body:
            if isinstance(node, ast.FunctionDef) and _public(node.name):
                decos = {d.id for d in node.decorator_list if isinstance(d, ast.Name)}
                if "property" not in decos:
                    cases.append(pytest.param(cname, node.name, node, id=f"{cname}.{node.name}"))
    return cases


@pytest.mark.parametrize("owner,method,fn", _signature_cases())
def test_signatures_match(owner, method, fn):
    if method is None:
        obj = getattr(_native, owner)
        drop_self = False
    else:
        obj = getattr(getattr(_native, owner), method)
        decos = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
        drop_self = "staticmethod" not in decos
    try:
        pos, kwonly, var = _runtime_params(obj, drop_self)
    except (ValueError, TypeError):
        pytest.fail(f"{owner}.{method or ''}: no introspectable signature (text_signature)")
    stub_pos, stub_kwonly = _stub_params(fn, drop_self)
    if fn.args.kwarg is not None or fn.args.vararg is not None:
        assert var, f"{owner}.{method}: stub takes *args/**kwargs"
    assert pos == stub_pos, f"{owner}.{method}: positional parameters {pos} != stub {stub_pos}"
    assert sorted(kwonly) == sorted(stub_kwonly), (
        f"{owner}.{method}: keyword-only {kwonly} != stub {stub_kwonly}"
    )
