"""Forwarding through temporaries: read a fresh buffer's loads as the value stored into it.

A transform may introduce a buffer with no counterpart in the old program; the op declares what
each one holds (``semantics.sched.datamap``), and a fresh buffer it does not declare leaves the
comparison unknown. A ``Forward`` is a scalar temporary ``f`` written by one store
``w: f[] = e`` (``e`` the declared expression) and read by later statements (the common-load
sharing after a materializing unroll). Such a program is compared with the old one through its
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

A ``Copy`` is a *private tile* ``f`` of a buffer ``target`` (``privatize``): one
load ``f[u] = target[cell(u)]`` and one store-back ``target[cell(u)] = f[u]``, each over ``f``'s
owner loops and one loop per axis, and users that read and update ``f`` in between. Such a
program is compared through its *restored* form: every access ``f[t]`` turned into
``target[cell(t)]``, the two transfers and the declaration dropped (``restore``). That is exact
when every use of a tile cell lies between its load and its store-back and nothing else touches
the target cell meanwhile (``_tile_cases``). Tiles are restored first, then the scalar
temporaries left are inlined.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence, Union

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IExpr, IVar
from tilecert.semantics.printer import sexpr
from tilecert.semantics.sched.base import Tau, substitute_many
from tilecert.semantics.sched.datamap import Copy, DataMap, Forward

from .correspondence import Correspondence, correspond
from .formula import Term, conj, differ, disj, term_of
from .model import (BufferRec, Inst, Model, Stmt, access_guard, domain, in_bounds, index_terms, inst,
                    same_cell)
from .order import Names, happens_before
from .solve import Case, search



def through_temporaries(c: Correspondence, tau: Tau, timeout_ms: int,
                        datamaps: Sequence[DataMap] = ()) -> Union[Correspondence, str]:
    """``c`` when the transform introduced no buffer; otherwise the correspondence of the old program with
    the new one, the private tiles ``datamaps`` declare restored and its forwarded temporaries inlined, or
    the reason the fresh buffers cannot be read through."""
    if not c.fresh or c.new.problems:
        return c
    declared = {d.buffer: d for d in datamaps if isinstance(d, (Copy, Forward))}
    undeclared = [f.name for f in c.fresh if f.name not in declared]
    if undeclared:
        return f"the transform introduces buffers ({', '.join(undeclared)}) without declaring what they hold"
    copies = [(f, declared[f.name]) for f in c.fresh if isinstance(declared[f.name], Copy)]
    if copies:
        names = ", ".join(f.name for f, _ in copies)
        tiles = [tile_of(c.new, f, d.source) for f, d in copies]
        wrong = next((t for t in tiles if isinstance(t, str)), None)
        if wrong is not None:
            return f"the transform introduces private tiles ({names}) and {wrong}"
        restored = restore(c.new, tiles, timeout_ms)
        if isinstance(restored, str):
            return f"the transform introduces private tiles ({names}) and {restored}"
        m = Model(restored, c.new.sizes)
        if m.problems:
            return f"the program with the private tiles ({names}) restored is ill-formed: {m.problems[0]}"
        c = correspond(c.old, m, tau, timeout_ms, datamaps)
        if not c.fresh:
            return c
    inlined = inline(c.new, c.fresh, {n: d.expression for n, d in declared.items() if isinstance(d, Forward)},
                     timeout_ms)
    if isinstance(inlined, str):
        return f"the transform introduces temporaries ({', '.join(b.name for b in c.fresh)}) and {inlined}"
    return correspond(c.old, Model(inlined, c.new.sizes), tau, timeout_ms, datamaps)


def inline(m: Model, fresh: list[BufferRec], expressions: Mapping[str, L.SExpr],
           timeout_ms: int) -> Union[ir.Program, str]:
    """The program of ``m`` with the temporaries ``fresh`` forwarded, or why that is not exact: each must be
    a scalar written by one store of its declared expression (``expressions``)."""
    values: dict[int, L.SExpr] = {}
    drop: set[int] = set()
    cases: list[Case] = []
    fresh_names = Names()
    for f in fresh:
        if f.name not in expressions:
            return f"{f.name} is declared a copy, not a forwarded value"
        if f.shape:
            return f"temporary {f.name} is not a scalar"
        writers = [s for s in m.statements if s.target is f and s.kind != "decl"]
        if len(writers) != 1 or writers[0].kind != "assign":
            return f"temporary {f.name} is not written by exactly one store"
        w = writers[0]
        if w.node.value != expressions[f.name]:
            return f"temporary {f.name} is stored {sexpr(w.node.value)}, not the declared {sexpr(expressions[f.name])}"
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
    body = _rewrite(m.program.body, lambda ld: by_name.get(ld.buf, ld), lambda st: st, drop)
    return dataclasses.replace(m.program, body=body)


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


# ----------------------------------------------------------------------------- private tiles
@dataclass(frozen=True)
class Tile:
    """A private tile ``f`` of buffer ``target``: ``load`` copies ``f[u] = target[cell(u)]`` and ``store``
    copies ``target[cell_S(u)] = f[u]``, each over ``f``'s owner loops then one loop per axis of ``f``
    (``u``, in order); every other statement accessing ``f`` is a *user*."""

    f: BufferRec
    target: BufferRec
    load: Stmt
    store: Stmt
    users: tuple[Stmt, ...]

    def cell(self, index: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        """``cell(index)``: the load's index into ``target`` at ``u = index``."""
        us = self.load.vars[len(self.f.owner_loops):]
        return tuple(substitute_many(e, dict(zip(us, index))) for e in self.load.accesses[0].index)

    def at(self, s: Stmt, x: Inst, u: list[Term]) -> Inst:
        """The instance of transfer ``s`` (load or store) on the allocation of ``x`` at tile cell ``u``."""
        n = len(self.f.owner_loops)
        return Inst(s, {**{v: x.at[v] for v in s.vars[:n]}, **dict(zip(s.vars[n:], u))})


def tile_of(m: Model, f: BufferRec, source: str) -> Union[Tile, str]:
    """``f``, declared a private copy of ``source``, as a tile: loaded by exactly one transfer from and stored
    by exactly one transfer to ``source``, of its dtype, every statement accessing it inside its owner loops,
    neither name shadowed; otherwise why the declaration does not hold."""
    owner = f.owner_loops

    def inside(s: Stmt) -> bool:
        return len(s.loops) >= len(owner) and all(a.node is b.node for a, b in zip(s.loops, owner))

    def transfer(s: Stmt, dst: BufferRec, src: BufferRec) -> bool:
        u = tuple(IVar(lp.var, 0) for lp in s.loops[len(owner):])
        return (s.kind == "assign" and s.target is dst and isinstance(s.node.value, L.Ld) and inside(s)
                and s.accesses[0].buffer is src and len(u) == len(f.shape)
                and (s.node.index if dst is f else s.node.value.index) == u)

    users = [s for s in m.statements if s.kind != "decl" and any(a.buffer is f for a in s.accesses)]
    if not all(map(inside, users)):
        return f"{f.name} is accessed outside the loops that own it"
    loads = [s for s in users if s.target is f and transfer(s, f, s.accesses[0].buffer)
             and s.accesses[0].buffer.name == source]
    if len(loads) != 1:
        return f"{f.name} is not loaded from {source} by exactly one transfer"
    target = loads[0].accesses[0].buffer
    stores = [s for s in users if transfer(s, target, f)]
    if len(stores) != 1:
        return f"{f.name} is not stored back to {source} by exactly one transfer"
    if target.dtype != f.dtype or not all(sum(b.name == x.name for b in m.buffers) == 1 for x in (f, target)):
        return f"{f.name} and {source} differ in dtype or one of their names is declared twice"
    return Tile(f, target, loads[0], stores[0], tuple(s for s in users if s not in (loads[0], stores[0])))


def restore(m: Model, tiles: list[Tile], timeout_ms: int) -> Union[ir.Program, str]:
    """The program of ``m`` with every tile ``f`` replaced by its target (``f[t]`` read and written as
    ``target[cell(t)]``, the transfers and ``f``'s declaration dropped), or why that is not exact."""
    names = Names()
    out = search([case for t in tiles for case in _tile_cases(m, t, names)], timeout_ms)
    if out.status == "point":
        return f"restoring them fails: {out.case.about} at {dict(out.point)}"
    if out.status == "unknown":
        return f"restoring them is undecided: {out.reason}"
    by_name = {t.f.name: t for t in tiles}

    def load(ld: L.Ld) -> L.SExpr:
        t = by_name.get(ld.buf)
        return L.Ld(t.target.name, t.cell(ld.index), ld.dtype) if t is not None else ld

    def store(st: Any) -> Any:
        t = by_name.get(st.buf)
        return dataclasses.replace(st, buf=t.target.name, index=t.cell(st.index)) if t is not None else st

    drop = {id(s.node) for t in tiles for s in (t.load, t.store, t.f.decl)}
    return dataclasses.replace(m.program, body=_rewrite(m.program.body, load, store, drop))


def _tile_cases(m: Model, t: Tile, names: Names) -> list[Case]:
    """The window conditions of tile ``t``, for every load instance ``z`` (tile cell ``u``, target cell ``c``)
    and the store instance ``z'`` of the same allocation and ``u``:

        (1) z in D_load  =>  z' in D_store, cell_S(z') = c, HB(z, z')        every loaded cell is stored back
        (2) z' in D_store  =>  z in D_load                                 and only loaded cells are
        (3) y accesses c, y not z, z'  =>  HB(y, z) or HB(z', y)            nothing else touches c in between
        (4) user r accesses f[u], cell(u) in bounds of target
                =>  z in D_load, HB(z, r), HB(r, z')                      every use lies in its window

    Then ``f[u]`` holds, from ``z`` to ``z'``, what ``target[c]`` holds in the restored program, and after
    ``z'`` the two programs agree on ``c``. (4) leaves out the uses the restored program makes out of
    bounds: there it fails, and so does the old program wherever an old instance performs that access
    (``agreement`` ties their cells), which its ``bounds`` obligation reports."""
    key = f"tile{t.f.decl.id}"
    read, write = t.load.accesses[0], t.store.accesses[-1]
    z = inst(t.load, names.prefix())
    u = z.coords()[len(t.f.owner_loops):]
    zs = t.at(t.store, z, u)
    window = conj(domain(m, z), domain(m, zs))
    cases = [Case(f"stored{key}", domain(m, z), conj(domain(m, zs), same_cell(m, zs, write, z, read),
                                                     happens_before(m, z, zs, names)),
                  about=f"a cell of {t.f.name} loaded from {t.target.name} is not stored back to it afterwards"),
             Case(f"loaded{key}", domain(m, zs), domain(m, z),
                  about=f"a cell of {t.f.name} is stored to {t.target.name} without being loaded from it")]
    for s in m.statements:
        for j, a in enumerate(a for a in s.accesses if a.buffer is t.target):
            y = inst(s, names.prefix())
            distinct = [differ(y.coords(), x.coords()) for x in (z, zs) if x.stmt is s]
            cases.append(Case(f"alone{key}_{s.id}_{j}",
                              conj(window, domain(m, y), access_guard(m, y, a), same_cell(m, y, a, z, read), *distinct),
                              disj(happens_before(m, y, z, names), happens_before(m, zs, y, names)),
                              about=f"`{s.label()}` accesses a cell of {t.target.name} while {t.f.name} holds it"))
    for s in t.users:
        for j, a in enumerate(a for a in s.accesses if a.buffer is t.f):
            r = inst(s, names.prefix())
            cell = index_terms(m, r, a)
            zr, zsr = t.at(t.load, r, cell), t.at(t.store, r, cell)
            restored = [term_of(e, m.env(r.at)) for e in t.cell(a.index)]
            cases.append(Case(f"inside{key}_{s.id}_{j}",
                              conj(domain(m, r), access_guard(m, r, a), in_bounds(m, r, restored, t.target)),
                              conj(domain(m, zr), happens_before(m, zr, r, names), happens_before(m, r, zsr, names)),
                              about=f"`{s.label()}` accesses a cell of {t.f.name} outside the window between its "
                                    f"load and its store-back"))
    return cases


def _rewrite(node: Any, load: Callable[[L.Ld], L.SExpr], store: Callable[[Any], Any], drop: set[int]) -> Any:
    """``node`` with every load replaced by ``load(ld)``, every store or update by ``store(st)``, the statements
    in ``drop`` left out and the loops and guards they leave empty removed."""
    if isinstance(node, ir.Block):
        ops = (_rewrite(st, load, store, drop) for st in node.ops if id(st) not in drop)
        return ir.Block(node.args, tuple(st for st in ops if st is not None), node.yields)
    if isinstance(node, (L.Loop, L.If)):
        body = _rewrite(node.body, load, store, drop)
        return dataclasses.replace(node, body=body) if body.ops or not node.body.ops else None
    if isinstance(node, (L.Assign, L.Accum)):
        return store(dataclasses.replace(node, value=_value(node.value, load)))
    return node


def _value(e: L.SExpr, load: Callable[[L.Ld], L.SExpr]) -> L.SExpr:
    if isinstance(e, L.Ld):
        return load(e)
    if isinstance(e, (L.Un, L.Cvt)):
        return dataclasses.replace(e, x=_value(e.x, load))
    if isinstance(e, L.Bin):
        return dataclasses.replace(e, a=_value(e.a, load), b=_value(e.b, load))
    if isinstance(e, L.Sel):
        return dataclasses.replace(e, cond=_value(e.cond, load), a=_value(e.a, load), b=_value(e.b, load))
    return e
