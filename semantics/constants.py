"""Constant inputs: the tensors a program declares constant (unwritten, the same on every call).

A backend may compute data derived from a constant input once and reuse it across calls (the
hoisted packs of ``lowering.packs``). The mark lives in ``Program.config``, whose values are
scalars (``ir.Scalar``, JSON round trip by ``serialize``): one entry ``("constant:<name>", True)``
per constant input, so marked programs serialize as any other.
"""
from __future__ import annotations

from typing import Iterable

from .ir import Program

PREFIX = "constant:"


def constant_inputs(p: Program) -> frozenset[str]:
    """The names of the tensors ``p`` declares constant."""
    return frozenset(key[len(PREFIX):] for key, value in p.config if key.startswith(PREFIX) and value is True)


def with_constants(p: Program, names: Iterable[str]) -> Program:
    """``p`` with the tensors ``names`` declared constant as well (what it declared stays)."""
    marked = constant_inputs(p) | frozenset(names)
    config = tuple(kv for kv in p.config if not kv[0].startswith(PREFIX))
    config += tuple((PREFIX + name, True) for name in sorted(marked))
    return Program(p.name, p.sizes, p.tensors, p.body, config, p.loc)
