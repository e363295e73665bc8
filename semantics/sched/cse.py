"""Common-subexpression elimination of repeated loads in a straight-line statement sequence.

The pass that runs on the copies a materializing ``unroll`` leaves side by side: copies
with constant indices repeat loads (a register-blocked micro-kernel reads ``a[i, k]`` once
per ``j`` copy), and one scalar temporary can serve them all.

Rewrite: for a sequence ``S_1 ... S_n`` and a load ``Ld(b, x)`` (buffer, index, dtype
identical), a *group* is a first occurrence in ``S_j`` followed by the occurrences in
``S_j ... S_k``; when the group has at least two occurrences it becomes

    local t: dtype[]          (a rank-0 local buffer, declared just before S_j)
    t[] = b[x]
    S_j ... S_k  with each occurrence of b[x] replaced by t[]

Side condition (what makes every replaced load read the value ``t`` holds):

- occurrences are counted only in the values of the sequence's own ``Assign`` / ``Accum``
  statements (every index variable in them is bound outside the sequence, so ``x`` denotes
  the same cell at each occurrence), and the first occurrence is unconditional: not inside
  a branch of a select, whose loads run only where the branch is chosen (hoisting one out
  could create an access, e.g. out of bounds, that the program does not make);
- no statement of ``S_j ... S_{k-1}`` writes ``b`` (any ``Assign`` / ``Accum`` to ``b`` or
  ``Decl`` of ``b`` anywhere inside it, whatever the index: conservative) or contains a
  barrier (conservative too: another participant's write is only ordered by one). A
  statement's own loads run before its write, so an occurrence in the writing statement
  ``S_k`` itself still belongs to the group.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from .. import ir
from .. import loopir as L
from .base import fresh_buffer
from ..transform import Forward


def _occurrences(e: L.SExpr, conditional: bool = False) -> list[tuple[L.Ld, bool]]:
    """Every load of ``e`` with whether it runs only under a select's branch."""
    if isinstance(e, L.Ld):
        return [(e, conditional)]
    if isinstance(e, (L.Un, L.Cvt)):
        return _occurrences(e.x, conditional)
    if isinstance(e, L.Bin):
        return _occurrences(e.a, conditional) + _occurrences(e.b, conditional)
    if isinstance(e, L.Sel):
        return _occurrences(e.cond, conditional) + _occurrences(e.a, True) + _occurrences(e.b, True)
    return []


def _replace(e: L.SExpr, temps: dict[L.Ld, str]) -> L.SExpr:
    if isinstance(e, L.Ld):
        return L.Ld(temps[e], (), e.dtype) if e in temps else e
    if isinstance(e, (L.Un, L.Cvt)):
        return dataclasses.replace(e, x=_replace(e.x, temps))
    if isinstance(e, L.Bin):
        return L.Bin(e.fn, _replace(e.a, temps), _replace(e.b, temps), e.dtype)
    if isinstance(e, L.Sel):
        return L.Sel(_replace(e.cond, temps), _replace(e.a, temps), _replace(e.b, temps), e.dtype)
    return e


def _clobbers(st: Any) -> tuple[set[str], bool]:
    """The buffers ``st`` writes or declares anywhere inside it, and whether it holds a barrier."""
    written: set[str] = set()
    barrier = False
    for s in ir.walk(ir.Block((), (st,))):
        if isinstance(s, (L.Assign, L.Accum)):
            written.add(s.buf)
        elif isinstance(s, L.Decl):
            written.add(s.buf.name)
        elif isinstance(s, L.Barrier):
            barrier = True
    return written, barrier


def cse_loads(stmts: tuple, taken: set[str]) -> tuple[tuple, tuple[Forward, ...]]:
    """``stmts`` with each repeated load group served by one scalar temporary (names avoid ``taken``),
    and the declaration of each temporary: it forwards the load it replaces."""
    groups: list[tuple[L.Ld, int, list[int]]] = []  # (load, first statement, statements using it)
    live: dict[L.Ld, int] = {}  # load -> its open group
    for j, st in enumerate(stmts):
        if isinstance(st, (L.Assign, L.Accum)):
            for ld, conditional in _occurrences(st.value):
                if ld in live:
                    groups[live[ld]][2].append(j)
                elif not conditional:
                    live[ld] = len(groups)
                    groups.append((ld, j, [j]))
        written, barrier = _clobbers(st)
        for ld in [ld for ld in live if barrier or ld.buf in written]:
            del live[ld]
    before: dict[int, list] = {}
    temps: dict[int, dict[L.Ld, str]] = {}
    forwards: list[Forward] = []
    for ld, first, uses in groups:
        if len(uses) < 2:
            continue
        t = fresh_buffer(f"{ld.buf}_cse", taken)
        forwards.append(Forward(t, ld))
        loc = stmts[first].loc
        before.setdefault(first, []).extend([L.Decl(L.Buffer(t, ld.dtype, (), "local"), loc),
                                             L.Assign(t, (), ld, loc)])
        for j in uses:
            temps.setdefault(j, {})[ld] = t
    out: list = []
    for j, st in enumerate(stmts):
        out.extend(before.get(j, ()))
        out.append(dataclasses.replace(st, value=_replace(st.value, temps[j])) if j in temps else st)
    return tuple(out), tuple(forwards)
