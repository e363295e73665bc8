"""Which declared buffers need no zero fill: every read of a cell follows a write of it.

A ``Decl`` allocates a zero-filled buffer per instance of its enclosing loops (the loop-form
semantics). The fill is observable only through a read (a load, or the read half of an
``Accum``) of a cell that no ``Assign`` has written earlier in the same allocation instance.
``written_first(program, sizes)`` gives the statement numbers (``checker.model.Model``
numbering, the ``sid`` of a lowered ``Alloc``) of the declarations proved free of such
reads, on the checker's engine; ``written_first_decls`` the identities of the ``Decl`` nodes themselves (the
barrier pass drops the zero fill of a hoisted shared buffer among them). For declaration ``d`` of buffer ``f`` and each read access
``r`` of ``f`` in a statement ``s``, the case

    y in D_s, r happens at y,
    and not  exists t an Assign to f, w in D_t with w's owner coordinates those of y:
             w writes the cell r reads at y  and  HB(w, y)

(``checker.order.happens_before``) must be empty, for all values of the sizes left free. A
point, an unknown, an ill-formed or shadowing program keeps the fill: only a proof drops it.
The lowering keeps every block's order and runs each loop upwards, so what the scheduled
order ``HB`` puts first runs first in the lowered program too.
"""
from __future__ import annotations

from typing import Mapping

from tilecert.checker.formula import conj, disj, exists
from tilecert.checker.model import BufferRec, Model, Stmt, access_guard, domain, inst, same_cell
from tilecert.checker.order import Names, happens_before
from tilecert.checker.solve import Case, search
from tilecert.semantics import ir


def written_first(program: ir.Program, sizes: Mapping[str, int]) -> frozenset[int]:
    """The statement numbers of the ``Decl`` s of loop-form ``program`` whose buffer is proved written
    before it is read, cell by cell, in every allocation instance (the rule above)."""
    return frozenset(d.id for d, proved in _decls(program, sizes) if proved)


def written_first_decls(program: ir.Program, sizes: Mapping[str, int]) -> frozenset[int]:
    """The ``id`` s of the ``Decl`` nodes of loop-form ``program`` proved written before read (those of
    ``written_first``) at every place the node occurs."""
    decls = _decls(program, sizes)
    return frozenset(id(d.node) for d, proved in decls if proved) - {id(d.node) for d, proved in decls if not proved}


def _decls(program: ir.Program, sizes: Mapping[str, int]) -> list[tuple[Stmt, bool]]:
    """Every declaration statement of ``program`` with whether the rule above proves it (none on a program
    the model finds ill-formed or shadowing)."""
    m = Model(program, sizes)
    decls = [d for d in m.statements if d.kind == "decl"]
    if m.problems or m.shadows:
        return [(d, False) for d in decls]
    return [(d, d.target is not None and _proved(m, d, d.target)) for d in decls]


def _proved(m: Model, d: Stmt, f: BufferRec) -> bool:
    owner = len(d.loops)
    writers = [s for s in m.statements if s.kind == "assign" and s.target is f]
    if any(not _inside(s, d) for s in m.statements if s.target is f or any(a.buffer is f for a in s.accesses)):
        return False  # an access outside the declaration's loops: not one allocation instance per owner
    names, cases = Names("w"), []
    for s in m.statements:
        for k, r in enumerate(a for a in s.accesses if a.buffer is f and a.mode in ("read", "update")):
            y = inst(s, "y")
            earlier = []
            for t in writers:
                w = inst(t, names.prefix(), share=(y, owner))
                write = next(a for a in t.accesses if a.buffer is f and a.mode == "write")
                earlier.append(exists(w.owned(owner), conj(domain(m, w), same_cell(m, w, write, y, r),
                                                           happens_before(m, w, y, names))))
            cases.append(Case(f"read{s.id}_{k}", conj(domain(m, y), access_guard(m, y, r)), disj(*earlier)))
    return search(cases).status == "empty"


def _inside(s: Stmt, d: Stmt) -> bool:
    return len(s.loops) >= len(d.loops) and all(a.node is b.node for a, b in zip(s.loops, d.loops))
