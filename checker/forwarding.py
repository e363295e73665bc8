"""Forwarding through temporaries: read a fresh buffer's loads as the value stored into it.

A transform may introduce a buffer with no counterpart in the old program: a scalar temporary
``f`` written by one store ``w: f[] = e`` and read by later statements (the common-load sharing
after a materializing unroll). Such a program is compared with the old one through its
*inlined* form: every load of ``f`` replaced by ``e``, the store and the declaration dropped.
That is exact when, for every reading instance ``r`` and the instance ``z`` of ``w`` that
shares ``r``'s coordinates on ``w``'s loops (``w``'s loops must surround every reader):

    (1) z runs before r and writes the cell r reads:   D_r => z in D_w, cell_w(z) = cell(r), HB(z, r)
    (2) no other store of f to that cell in between:    not (z2 in D_w, cell_w(z2) = cell(r), HB(z, z2), HB(z2, r))
    (3) no store to a cell e reads, in between:          not (u writes cell_e(z), HB(z, u), HB(u, r))

so the value ``r`` loads is the value ``e`` has at ``r``. ``inline`` returns the inlined
program, or the reason it cannot: a temporary that is not a scalar, is written by an update
or by several statements, or is read outside its store's loops, or a point where (1)-(3)
fail (with the instances).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Union

from tilecert.semantics import ir
from tilecert.semantics import loopir as L

from tilecert.semantics.sched.base import Tau

from .correspondence import Correspondence, correspond
from .formula import conj
from .model import BufferRec, Model, Stmt, access_guard, domain, inst, same_cell
from .order import Names, happens_before
from .solve import Case, search



def through_temporaries(c: Correspondence, tau: Tau, timeout_ms: int) -> Union[Correspondence, str]:
    """``c`` when the transform introduced no buffer; otherwise the correspondence of the old program with
    the new one inlined, or the reason the temporaries cannot be read through."""
    if not c.fresh or c.new.problems:
        return c
    inlined = inline(c.new, c.fresh, timeout_ms)
    if isinstance(inlined, str):
        return f"the transform introduces temporaries ({', '.join(b.name for b in c.fresh)}) and {inlined}"
    return correspond(c.old, Model(inlined, c.new.sizes), tau, timeout_ms)


def inline(m: Model, fresh: list[BufferRec], timeout_ms: int) -> Union[ir.Program, str]:
    """The program of ``m`` with the temporaries ``fresh`` forwarded, or why that is not exact."""
    values: dict[int, L.SExpr] = {}
    drop: set[int] = set()
    cases: list[Case] = []
    fresh_names = Names()
    for f in fresh:
        if f.shape:
            return f"temporary {f.name} is not a scalar"
        writers = [s for s in m.statements if s.target is f and s.kind != "decl"]
        if len(writers) != 1 or writers[0].kind != "assign":
            return f"temporary {f.name} is not written by exactly one store"
        w = writers[0]
        readers = [s for s in m.statements if any(a.buffer is f and a.mode == "read" for a in s.accesses)]
        for s in readers:
            if len(w.loops) > len(s.loops) or any(a.node is not b.node for a, b in zip(w.loops, s.loops)):
                return f"temporary {f.name} is read outside the loops of its store"
            cases += _forwarding_cases(m, f, w, s, fresh_names)
        values[id(f)] = w.node.value
        drop |= {id(w.node), id(f.decl.node)}
    out = search(cases, timeout_ms)
    if out.status == "point":
        return f"forwarding fails: {out.case.about} at {dict(out.point)}"
    if out.status == "unknown":
        return f"forwarding undecided: {out.reason}"
    by_name = {f.name: values[id(f)] for f in fresh}
    return dataclasses.replace(m.program, body=_rewrite(m.program.body, by_name, drop))


def _forwarding_cases(m: Model, f: BufferRec, w: Stmt, s: Stmt, fresh: Names) -> list[Case]:
    write = next(a for a in w.accesses if a.buffer is f)
    out = []
    for j, read in enumerate(a for a in s.accesses if a.buffer is f and a.mode == "read"):
        r = inst(s, "a")
        z = inst(w, "b", share=(r, len(w.loops)))
        at_r = conj(domain(m, r), access_guard(m, r, read))
        key = f"{f.name}_{s.id}_{j}"
        out.append(Case(f"stored{key}", at_r, conj(domain(m, z), same_cell(m, z, write, r, read),
                                                   happens_before(m, z, r, fresh)),
                        about=f"the store of {f.name} does not run before `{s.label()}`"))
        z2 = inst(w, "c")
        out.append(Case(f"again{key}", conj(at_r, domain(m, z), domain(m, z2), same_cell(m, z2, write, r, read),
                                            happens_before(m, z, z2, fresh), happens_before(m, z2, r, fresh)),
                        about=f"{f.name} is stored again before `{s.label()}` reads it"))
        for k, operand in enumerate(a for a in w.accesses if a.mode == "read"):
            for t in m.statements:
                for u in (a for a in t.accesses if a.buffer is operand.buffer and a.writes):
                    y = inst(t, "d")
                    out.append(Case(f"op{key}_{k}_{t.id}", conj(at_r, domain(m, z), access_guard(m, z, operand),
                                                                  domain(m, y), same_cell(m, y, u, z, operand),
                                                                  happens_before(m, z, y, fresh),
                                                                  happens_before(m, y, r, fresh)),
                                    about=f"{operand.buffer.name}, read into {f.name}, is written by `{t.label()}` "
                                          f"before `{s.label()}` reads {f.name}"))
    return out


def _rewrite(node: Any, values: Mapping[str, L.SExpr], drop: set[int]) -> Any:
    if isinstance(node, ir.Block):
        ops = tuple(_rewrite(st, values, drop) for st in node.ops if id(st) not in drop)
        return ir.Block(node.args, ops, node.yields)
    if isinstance(node, (L.Loop, L.If)):
        return dataclasses.replace(node, body=_rewrite(node.body, values, drop))
    if isinstance(node, (L.Assign, L.Accum)):
        return dataclasses.replace(node, value=_value(node.value, values))
    return node


def _value(e: L.SExpr, values: Mapping[str, L.SExpr]) -> L.SExpr:
    if isinstance(e, L.Ld):
        return values.get(e.buf, e)
    if isinstance(e, (L.Un, L.Cvt)):
        return dataclasses.replace(e, x=_value(e.x, values))
    if isinstance(e, L.Bin):
        return dataclasses.replace(e, a=_value(e.a, values), b=_value(e.b, values))
    if isinstance(e, L.Sel):
        return dataclasses.replace(e, cond=_value(e.cond, values), a=_value(e.a, values), b=_value(e.b, values))
    return e

