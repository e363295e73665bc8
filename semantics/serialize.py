"""JSON round trip of programs (``load(dump(p)) == p``) and the structural digest.

The digest hashes the program with every name replaced by its order of first
appearance (values, regions, memories, dims, size parameters, tensors) and with labels,
source locations and the kernel name dropped, so alpha-renaming leaves it unchanged.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import typing
from typing import Any, Union

from . import index, ir, layout, loopir
from .errors import Loc, SerializationError
from .dtypes import DTYPES
from .index import INDEX_OPS
from .jsondata import conforms, parse_json
from .pipeline.plan import ModuloPlan
from .ufuncs import BINARY, UNARY

_CLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        index.IConst, index.ISize, index.IVar, index.IBin, index.INot, Loc, ir.Dim, ir.TileType, ir.Value,
        ir.Full, ir.Iota, ir.IndexValue, ir.Cast, ir.Unary, ir.Binary, ir.Select, ir.Block, ir.ReduceExpr,
        ir.Mma, ir.Reshape, ir.ViewLoad, ir.ViewStore, ir.Alloc, ir.MemStore, ir.MemLoad, ir.Stage,
        ir.Parallel, ir.Serial, ir.Pipeline, ir.Reduce, ir.TensorDecl, ir.Program,
        loopir.Ld, loopir.Lit, loopir.Ix, loopir.Un, loopir.Bin, loopir.Sel, loopir.Cvt, loopir.Buffer,
        loopir.Decl, loopir.Assign, loopir.Accum, loopir.Barrier, loopir.If, loopir.Loop, layout.Swizzle,
        loopir.StageBlock, loopir.Pipelining, ModuloPlan, loopir.AsyncCopy, loopir.AsyncWait,
    )
}


def to_tree(obj: Any) -> Any:
    """The JSON-able tree of an IR object (dataclasses become tagged dicts)."""
    if dataclasses.is_dataclass(obj):
        node = {"_": type(obj).__name__}
        for f in dataclasses.fields(obj):
            node[f.name] = to_tree(getattr(obj, f.name))
        return node
    if isinstance(obj, (tuple, list)):
        return [to_tree(x) for x in obj]
    return obj


# ``Block.ops`` is annotated with tile ops but holds loop-form statements after expansion.
_FIELD_OVERRIDES = {("Block", "ops"): tuple[Union[ir.Op, loopir.Stmt], ...]}


# fields that hold a name from a closed set: (node class or "*", field) -> the admitted names
_ENUMS: dict[tuple[str, str], Any] = {
    ("*", "dtype"): DTYPES, ("*", "bounds"): ir.BOUNDS, ("*", "policy"): ir.POLICIES,
    ("Unary", "fn"): UNARY, ("Un", "fn"): UNARY, ("Binary", "fn"): BINARY, ("Bin", "fn"): BINARY,
    ("IBin", "op"): INDEX_OPS, ("Loop", "kind"): loopir.LOOP_KINDS, ("Swizzle", "kind"): layout.SWIZZLES,
}


def _admitted(name: str, key: str, value: Any) -> bool:
    """Whether a string field that names one of a closed set (``_ENUMS``) holds a member of it."""
    allowed = _ENUMS.get((name, key), _ENUMS.get(("*", key)))
    return allowed is None or not isinstance(value, str) or value in allowed


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_tree(node: Any) -> Any:
    """The IR object of a tree written by ``to_tree``; every field is checked against its annotated type."""
    if isinstance(node, list):
        return tuple(from_tree(x) for x in node)
    if isinstance(node, dict):
        name = node.get("_")
        cls = _CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise SerializationError(f"unknown IR node {name!r}", hint="the file is not a tilecert program")
        fields = {k: from_tree(v) for k, v in node.items() if k != "_"}
        hints = _field_types(cls)
        for key, value in fields.items():
            if not conforms(value, _FIELD_OVERRIDES.get((name, key), hints.get(key, Any))):
                raise SerializationError(f"malformed {name} node: field {key!r} holds {repr(value)[:80]}",
                                         hint="the file is not a tilecert program")
            if not _admitted(name, key, value):
                raise SerializationError(f"malformed {name} node: field {key!r} holds {value[:80]!r}, not one of "
                                         f"{sorted(_ENUMS.get((name, key), _ENUMS.get(('*', key))))}",
                                         hint="the file is not a tilecert program")
        try:
            return cls(**fields)
        except TypeError as exc:
            raise SerializationError(f"malformed {name} node: {exc}", hint="the file is not a tilecert program")
    return node


def dump(p: ir.Program) -> str:
    """Serialize a program as JSON text."""
    return json.dumps(to_tree(ir.expect_program(p, "dump")), sort_keys=True)


def load(text: str, file: str | None = None) -> ir.Program:
    """Parse JSON text produced by ``dump``: every node a known IR class, every field of its annotated type
    (``jsondata.conforms``), no duplicate keys, bounded nesting; ``file`` locates errors (else the caller)."""
    hint = "pass the text written by tilecert's dump"
    tree = parse_json(text, "program JSON", hint, file)
    try:
        p = from_tree(tree)
    except RecursionError:
        raise SerializationError("program JSON: nested too deeply", None if file is None else Loc(file, 0),
                                 hint) from None
    if not isinstance(p, ir.Program):
        raise SerializationError("the JSON does not hold a Program", None if file is None else Loc(file, 0), hint)
    return p


_DROP = {"label", "loc"}
_LABEL_NAMES = {"Program", "Stage", "Parallel", "Serial", "Pipeline", "Reduce", "Loop", "StageBlock"}
_RENAMED = {  # field -> namespace of the identifier it holds
    ("Value", "id"): "value", ("Dim", "id"): "dim", ("ISize", "name"): "size", ("IVar", "region"): "region",
    ("Parallel", "region"): "region", ("Serial", "region"): "region", ("Pipeline", "region"): "region",
    ("Reduce", "region"): "region", ("Alloc", "mem"): "mem", ("MemStore", "mem"): "mem", ("MemLoad", "mem"): "mem",
    ("ViewLoad", "tensor"): "tensor", ("ViewStore", "tensor"): "tensor", ("TensorDecl", "name"): "tensor",
    ("Buffer", "name"): "tensor", ("Ld", "buf"): "tensor", ("Assign", "buf"): "tensor", ("Accum", "buf"): "tensor",
    ("AsyncCopy", "buf"): "tensor", ("Loop", "var"): "region", ("StageBlock", "pipeline"): "region", ("Pipelining", "pipeline"): "region",
}
_VALUE_REFS = {"x", "a", "b", "c", "cond", "init", "fallback", "value", "inits", "yields"}
_OPS_WITH_REFS = {"Cast", "Unary", "Reshape", "Binary", "Select", "ReduceExpr", "Mma", "ViewLoad", "ViewStore",
                  "MemStore", "Serial", "Pipeline", "Reduce", "Block"}


def _canon(node: Any, names: dict[str, dict[Any, int]]) -> Any:
    if isinstance(node, list):
        return [_canon(x, names) for x in node]
    if not isinstance(node, dict):
        return node
    kind = node["_"]
    out: dict[str, Any] = {"_": kind}
    for key, val in node.items():
        if key == "_" or key in _DROP or (key == "name" and kind in _LABEL_NAMES) or (
                kind == "Program" and key == "config"):
            continue
        space = _RENAMED.get((kind, key))
        if kind == "Dim" and key == "id" and val < 0:
            space = None  # positional dims are canonical already
        if kind == "Program" and key == "sizes":
            val, space = list(val), "size"
        if space is None and key in _VALUE_REFS and kind in _OPS_WITH_REFS:
            space = "value"
        if space is not None:
            table = names.setdefault(space, {})
            ren = lambda v: None if v is None else table.setdefault(v, len(table))  # noqa: E731
            out[key] = [ren(v) for v in val] if isinstance(val, list) else ren(val)
        else:
            out[key] = _canon(val, names)
    return out


def digest(p: ir.Program) -> str:
    """A structural hash of ``p`` that is invariant under renaming."""
    canon = _canon(to_tree(ir.expect_program(p, "digest")), {})
    return hashlib.sha256(json.dumps(canon, sort_keys=True).encode()).hexdigest()
