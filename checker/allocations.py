"""Reading through reshaped and moved declarations (``Expanded``, ``Lifted``, ``semantics.transform``).

An op that changes where a buffer lives without minting a new one (``expand_dim``, ``lift_alloc``)
declares it; the checker verifies the declaration (the ``datamap`` obligation) and compares the old
program with the new one *restored*: rewritten back into the form the declaration says it stands for.

``Expanded(f, v_1..v_k)``: ``f``'s declaration lies inside the loops of ``v_1..v_k`` and its first ``k``
axes are their extents ``n_i`` (structure). For every access ``a`` of ``f`` and instance ``x``:

    (1) x in D_a, guard_a(x)  =>  index_a(x)[i] = x_vi - start_i      for i = 1..k

Within one allocation (fixed owner coordinates, the ``v_i`` among them) the leading index is then
the constant ``v - start`` in ``[0, n)``, so ``[v - start, u] -> u`` maps the cells the allocation uses
one to one onto those of a buffer of the remaining shape: the restored program (the leading index
terms and axes dropped) computes what the new one does, access for access, in bounds alike.

``Lifted(f, v_1..v_k)``: ``f`` is declared directly before the loop of ``v_1``, whose body holds the loop
of ``v_2`` and so on down to ``v_k`` (structure); every access of ``f`` lies inside ``v_k``'s loop, and
for every read (or update) ``a`` of ``x`` and write ``b`` of ``y`` of one allocation in another iteration
(``it(x) != it(y)``, ``it`` the coordinates on ``v_1..v_k``) that does not run after it:

    (2) x, y in D, guards, cell_a(x) = cell_b(y), it(x) != it(y), not HB(x, y)
            =>  exists z writing that cell, it(z) = it(x), HB(y, z), HB(z, x)

So the last write a read sees is of its own iteration, or there is none (and the cell still holds
the allocation's zero): with the declaration put back at the start of ``v_k``'s body (one zeroed
allocation per iteration), every access sees the same value and the restored program computes
what the new one does. Disjoint cells (after ``expand_dim``) satisfy (2) vacuously; so does an
iteration that writes a cell before reading it, in serial loops (concurrent iterations have no
``HB`` between them). A point where (1) or (2) fails disproves the declaration, with the instances.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional, Union

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IVar, ibin
from tilecert.semantics.mapper import Mapper
from tilecert.semantics.transform import Expanded, Lifted

from .declarations import alone, decided, refused
from .formula import conj, differ, disj, equal_all, exists, term_of
from .model import BufferRec, Model, Stmt, access_guard, domain, index_terms, inst, same_cell
from .order import Names, happens_before
from .solve import Case
from .verdict import Verdict, unknown


def _users(m: Model, f: BufferRec) -> list[Stmt]:
    return [s for s in m.statements if s.kind != "decl" and any(a.buffer is f for a in s.accesses)]


# ----------------------------------------------------------------------------- expanded
def restore_expanded(m: Model, fresh: list[tuple[BufferRec, Expanded]],
                     timeout_ms: int) -> Union[tuple[ir.Program, str], Verdict]:
    """The program of ``m`` with every expanded buffer's leading axes dropped (from its declaration and
    every access) and the engine that proved it exact, or the verdict on the declarations."""
    cases = []
    names = Names()
    drop: dict[str, int] = {}
    for f, d in fresh:
        if not alone(m, f):
            return unknown(f"the name of expanded buffer {f.name} is declared twice", "structure")
        owners = {lp.var: lp for lp in f.owner_loops}
        k = len(d.loops)
        if not set(d.loops) <= set(owners) or len(set(d.loops)) != k or len(f.shape) < k:
            return refused(f"{f.name} is declared expanded over loops that do not own it")
        if any(f.shape[i] != owners[v].node.extent for i, v in enumerate(d.loops)):
            return refused(f"the leading axes of {f.name} are not the extents of the loops it is expanded over")
        for s in _users(m, f):
            for j, a in enumerate(a for a in s.accesses if a.buffer is f):
                if a.index is None or len(a.index) != len(f.shape):
                    return unknown(f"`{s.label()}` indexes {f.name} with another rank than it has", "structure")
                x = inst(s, names.prefix())
                want = [term_of(ibin("sub", IVar(v, 0), owners[v].node.start), m.env(x.at)) for v in d.loops]
                cases.append(Case(f"lead{f.decl.id}_{s.id}_{j}", conj(domain(m, x), access_guard(m, x, a)),
                                  equal_all(index_terms(m, x, a)[:k], want),
                                  about=(f"`{s.label()}` indexes the leading axes of {f.name} by other than "
                                         "the iteration that owns the allocation", (x,))))
        drop[f.name] = k
    engine = decided(cases, timeout_ms)
    if isinstance(engine, Verdict):
        return engine
    return dataclasses.replace(m.program, body=_Narrowed(drop).map_block(m.program.body)), engine


class _Narrowed(Mapper):
    """Each buffer of ``drop`` without its first ``drop[name]`` axes and index terms."""

    def __init__(self, drop: dict[str, int]) -> None:
        self.drop = drop

    def map_decl(self, st: L.Decl) -> Any:
        k = self.drop.get(st.buf.name, 0)
        return dataclasses.replace(st, buf=dataclasses.replace(st.buf, shape=st.buf.shape[k:])) if k else st

    def map_ld(self, e: L.Ld) -> L.SExpr:
        k = self.drop.get(e.buf, 0)
        return dataclasses.replace(e, index=e.index[k:]) if k else e

    def map_assign(self, st: L.Assign) -> Any:
        return self._store(super().map_assign(st))

    def map_accum(self, st: L.Accum) -> Any:
        return self._store(super().map_accum(st))

    def _store(self, st: Any) -> Any:
        k = self.drop.get(st.buf, 0)
        return dataclasses.replace(st, index=st.index[k:]) if k else st


# ----------------------------------------------------------------------------- lifted
def _chain(block: ir.Block, decl: L.Decl, loops: tuple[int, ...]) -> Optional[list[L.Loop]]:
    """The loops of ``loops`` nested from the statement right after ``decl`` (found in ``block`` or below),
    each a direct child of the previous one's body; None when the program is not of that form."""
    for k, st in enumerate(block.ops):
        if st is decl:
            nxt = block.ops[k + 1] if k + 1 < len(block.ops) else None
            if not (isinstance(nxt, L.Loop) and nxt.var == loops[0]):
                return None
            chain = [nxt]
            for v in loops[1:]:
                inner = [c for c in chain[-1].body.ops if isinstance(c, L.Loop) and c.var == v]
                if len(inner) != 1:
                    return None
                chain.append(inner[0])
            return chain
        body = getattr(st, "body", None)
        if isinstance(body, ir.Block):
            found = _chain(body, decl, loops)
            if found is not None:
                return found
    return None


def restore_lifted(m: Model, fresh: list[tuple[BufferRec, Lifted]],
                   timeout_ms: int) -> Union[tuple[ir.Program, str], Verdict]:
    """The program of ``m`` with every lifted declaration put back at the start of the innermost loop it
    was lifted out of, and the engine that proved it exact, or the verdict on the declarations."""
    cases = []
    names = Names()
    moves: dict[int, L.Decl] = {}  # id(innermost loop) -> the declaration to put back in it
    for f, d in fresh:
        if not alone(m, f):
            return unknown(f"the name of lifted buffer {f.name} is declared twice", "structure")
        chain = _chain(m.program.body, f.decl.node, d.loops) if d.loops else None
        if chain is None:
            return unknown(f"{f.name} is not declared right before the loops it is declared lifted out of",
                           "structure")
        users = _users(m, f)
        if not all(any(lp.node is chain[-1] for lp in s.loops) for s in users):
            return unknown(f"{f.name} is accessed outside the loops it is declared lifted out of", "structure")
        cases += _flow_cases(m, f, d, users, names)
        moves[id(chain[-1])] = f.decl.node
    engine = decided(cases, timeout_ms)
    if isinstance(engine, Verdict):
        return engine
    return dataclasses.replace(m.program, body=_PutBack(moves).map_block(m.program.body)), engine


def _flow_cases(m: Model, f: BufferRec, d: Lifted, users: list[Stmt], names: Names) -> list[Case]:
    """Condition (2) of lifted ``f``: a read of a cell that another iteration writes before it (or with no
    order) finds a write of its own iteration in between."""
    owner, k = len(f.owner_loops), len(d.loops)
    writes = [(t, b) for t in users for b in t.accesses if b.buffer is f and b.writes]
    cases = []
    for s in users:
        for ja, a in enumerate(a for a in s.accesses if a.buffer is f and a.mode != "write"):
            for jb, (t, b) in enumerate(writes):
                x = inst(s, names.prefix())
                y = inst(t, names.prefix(), share=(x, owner))
                between = []
                for w, c in writes:
                    z = inst(w, names.prefix(), share=(x, owner + k))
                    between.append(exists(z.owned(owner + k), conj(domain(m, z), access_guard(m, z, c),
                                                                    same_cell(m, z, c, x, a),
                                                                    happens_before(m, z, x, names),
                                                                    happens_before(m, y, z, names))))
                cases.append(Case(f"lifted{f.decl.id}_{s.id}_{ja}_{jb}",
                                  conj(domain(m, x), domain(m, y), access_guard(m, x, a), access_guard(m, y, b),
                                       same_cell(m, x, a, y, b),
                                       differ([x.at[v] for v in d.loops], [y.at[v] for v in d.loops])),
                                  disj(happens_before(m, x, y, names), *between),
                                  about=(f"`{t.label()}` writes a cell of {f.name} in another iteration of the loops "
                                         f"it was lifted out of, before `{s.label()}` reads it (or with no order) and "
                                         "with no write of the reader's iteration in between: a value flows "
                                         "across the iterations", (y, x))))
    return cases


class _PutBack(Mapper):
    """Each declaration of ``moves`` removed and put first in the body of its loop."""

    def __init__(self, moves: dict[int, L.Decl]) -> None:
        self.moves = moves
        self.moved = {id(d) for d in moves.values()}

    def map_stmt(self, st: Any) -> Any:
        if id(st) in self.moved:
            return None
        new = super().map_stmt(st)
        if id(st) in self.moves:
            new = dataclasses.replace(new, body=dataclasses.replace(new.body, ops=(self.moves[id(st)],) + new.body.ops))
        return new

