"""The contract between a schedule op and the checker, as data.

A schedule op is a function ``(program, args) -> Transformed(program', tau, obligations,
handles, datamaps)``:

- ``tau`` maps the execution coordinates of the new program to the old ones whose work they
  perform (seed 004): for each old loop variable an expression over new variables, plus the
  guard under which a new coordinate is active (``Tau``, ``Piece``; ``compose`` chains two);
- ``obligations`` state, each under a ``Kind``, what must hold for the rewrite to preserve
  meaning; the checker discharges every kind it knows and reports, per op, the stated kinds
  beside the discharged ones (a stated kind it does not discharge is unknown, never proved);
- ``datamaps`` declare what each buffer the op mints stands for, so that the checker knows it
  from the op, never from the buffer's name or shape. The checker verifies every declaration
  (``Kind.DATAMAP``) and then compares the programs through it:

  - ``Copy(buffer, source, axes, cell, live)``: ``buffer[u]`` holds ``source[cell(u)]`` (``cell``
    over the variables ``axes``, one per axis of ``buffer``, and the loops around the
    declaration) between the load ``live.load`` (``buffer[u] = source[cell(u)]``) and the
    store-back ``live.store`` (``source[cell(u)] = buffer[u]``; None for a read-only copy). Holds
    when every use of a cell lies in its window and nothing else touches the source cell there; a
    read-only copy also claims that nothing in the routine writes its source. The load of a
    read-only copy may widen (``buffer[u] = Cvt(source[c], p)``, ``p`` the buffer's dtype) and may
    be edge-guarded (``buffer[u] = Sel(Ix(g), X, Lit(0))``, ``g`` exactly "``cell(u)`` is in bounds
    of ``source``"); ``zero_fringe`` claims that every cell whose source cell is out of bounds
    holds 0 wherever the buffer is read (``Kind.ZERO_FRINGE``).
  - ``Forward(buffer, expression)``: scalar ``buffer`` is written once with ``expression`` and
    read only where that value still holds (a CSE temporary).
  - ``Ring(buffer, source, versions, var, slot, axes, cell, fills, uses)``: a pipelined copy.
    ``buffer[slot(k), u]`` holds version ``k`` of ``source[cell(k, u)]``; each fill statement
    writes, and each use statement reads, the version its declared expression gives. Holds
    when a use of version ``k`` reads the slot last filled with version ``k`` and no fill of
    another version and no write to the source cell came in between. Fills take the load forms
    of a read-only ``Copy``, and ``zero_fringe`` makes the same claim.
  - ``Renamed(buffer, original)``: the declaration of ``original`` copied with its loop body.
  - ``Expanded(buffer, loops)``: the declaration of ``buffer`` keeps its place but gained one leading
    axis per loop variable of ``loops`` (each a loop around it), of that loop's extent; cell
    ``[v - start, u]`` stands for cell ``u`` of the allocation of instance ``v``. Holds when every
    access indexes the leading axes by exactly ``v - start``.
  - ``Lifted(buffer, loops)``: the declaration of ``buffer`` moved out of the nested loops ``loops``
    (variables, outermost first; it stood directly inside the last) to just before the first. Holds
    when every access of ``buffer`` lies inside the last loop and accesses differing in a coordinate
    of ``loops`` (of one allocation) touch distinct cells.

  A declaration no record names stands for the old declaration of the same name; each minted
  name is fresh (``sched.base.fresh_buffer``). Statements are named by identity: the node
  objects of the op's result program (the simplifier keeps the nodes it does not change).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Optional, Protocol, Union, runtime_checkable

from . import ir
from . import loopir as L
from .index import IConst, IExpr, IVar, conj, ibin, substitute_many


class Kind(StrEnum):
    """The obligation kinds: what ops state and the checker discharges (``str`` values, so reports and JSON
    read the plain names)."""

    COVERAGE = "coverage"
    PREFIX_CUT = "prefix_cut"
    DEPENDENCE = "dependence"
    DATAMAP = "datamap"
    NONINTERFERENCE = "noninterference"
    REDUCTION_POLICY = "reduction_policy"
    BARRIER_UNIFORM = "barrier_uniform"
    BOUNDS = "bounds"
    CONTAINMENT = "containment"
    HARDWARE_LIMITS = "hardware_limits"
    LAYOUT = "layout"
    PIPELINE_SCHEDULE = "pipeline_schedule"
    VERSIONS = "versions"
    RELEASE = "release"
    ZERO_FRINGE = "zero_fringe"


@dataclass(frozen=True)
class Obligation:
    """What must hold for one op to preserve meaning; ``formula`` states it, ``kind`` says which
    obligation of the checker discharges it (a str is read as its ``Kind``; an unknown one is refused)."""

    kind: Kind
    op: str
    formula: str
    loops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", Kind(self.kind))

    def __str__(self) -> str:
        where = f" [{', '.join(self.loops)}]" if self.loops else ""
        return f"{self.kind}{where}: {self.formula}"


@dataclass(frozen=True)
class Piece:
    """One piece of tau: new coordinates satisfying ``guard`` perform the old iteration whose
    loop variables ``subst`` gives (old variable -> expression over new variables)."""

    subst: tuple[tuple[int, IExpr], ...]
    guard: IExpr = IConst(1)

    def __str__(self) -> str:
        parts = ", ".join(f"i{v} := {e}" for v, e in self.subst)
        return "{" + parts + "}" + ("" if self.guard == IConst(1) else f" when {self.guard}")


@dataclass(frozen=True)
class Tau:
    """New coordinates -> old, piecewise (a partition or a split with a peeled tail has
    several pieces); the identity on every loop it does not mention."""

    pieces: tuple[Piece, ...] = ()

    def __str__(self) -> str:
        return " | ".join(str(p) for p in self.pieces) or "identity"


def compose(first: Tau, then: Tau, old_vars: frozenset[int]) -> Tau:
    """The tau of two ops in sequence: ``then`` maps the newest coordinates to the middle ones,
    ``first`` maps those to the old ones (whose loop variables are ``old_vars``). Pieces combine
    pairwise; guards conjoin."""
    pieces = []
    for a in first.pieces or (Piece(()),):
        for b in then.pieces or (Piece(()),):
            middle = dict(b.subst)
            mapped = {v for v, _ in a.subst}
            subst = tuple((v, substitute_many(e, middle)) for v, e in a.subst)
            subst += tuple((v, e) for v, e in b.subst if v in old_vars and v not in mapped)
            pieces.append(Piece(subst, conj(substitute_many(a.guard, middle), b.guard)))
    return Tau(tuple(pieces))


# ----------------------------------------------------------------------------- datamaps
def _at(exprs: tuple[IExpr, ...], values: dict[int, IExpr]) -> tuple[IExpr, ...]:
    return tuple(substitute_many(e, values) for e in exprs)


@dataclass(frozen=True)
class Live:
    """The live range of a copy: from statement ``load`` to statement ``store`` (None: read-only)."""

    load: L.Assign
    store: Optional[L.Assign] = None


@dataclass(frozen=True)
class Copy:
    """``buffer[u]`` holds ``source[cell(u)]`` over ``live`` (``u`` the variables ``axes``); with
    ``zero_fringe``, 0 wherever ``cell(u)`` is out of bounds of ``source``."""

    buffer: str
    source: str
    axes: tuple[int, ...]
    cell: tuple[IExpr, ...]
    live: Live
    zero_fringe: bool = False

    def cell_at(self, index: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        """``cell(index)``: the source cell that copy cell ``index`` stands for."""
        return _at(self.cell, dict(zip(self.axes, index)))


@dataclass(frozen=True)
class Forward:
    """Scalar ``buffer`` holds the value of ``expression`` wherever it is read."""

    buffer: str
    expression: L.SExpr


@dataclass(frozen=True)
class Ring:
    """``buffer[slot(k), u]`` holds version ``k`` of ``source[cell(k, u)]`` (``k`` the variable ``var``,
    ``u`` the variables ``axes``); ``fills`` and ``uses`` pair each statement that writes / reads
    ``buffer`` with the version it writes / reads, over that statement's loop variables; with
    ``zero_fringe``, a slot holds 0 wherever ``cell(k, u)`` is out of bounds of ``source``."""

    buffer: str
    source: str
    versions: int
    var: int
    slot: IExpr
    axes: tuple[int, ...]
    cell: tuple[IExpr, ...]
    fills: tuple[tuple[L.Assign, IExpr], ...]
    uses: tuple[tuple[Union[L.Assign, L.Accum], IExpr], ...]
    zero_fringe: bool = False

    def slot_of(self, version: IExpr) -> IExpr:
        return substitute_many(self.slot, {self.var: version})

    def cell_of(self, version: IExpr, index: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        """``cell(version, index)``: the source cell of tile cell ``index`` of ``version``."""
        return _at(self.cell, {self.var: version, **dict(zip(self.axes, index))})


def ring_slot(var: int, versions: int) -> IExpr:
    """The usual slot map of a ring of ``versions`` slots: ``k mod versions``."""
    return ibin("mod", IVar(var, 0), IConst(versions))


@dataclass(frozen=True)
class Renamed:
    """``buffer`` is the declaration of ``original``, copied with its loop body under a new name."""

    buffer: str
    original: str


@dataclass(frozen=True)
class Expanded:
    """``buffer`` gained one leading axis per loop variable of ``loops``, indexed by that variable minus its start."""

    buffer: str
    loops: tuple[int, ...]


@dataclass(frozen=True)
class Lifted:
    """The declaration of ``buffer`` moved out of the nested loops ``loops`` (variables, outermost first)."""

    buffer: str
    loops: tuple[int, ...]


DataMap = Union[Copy, Forward, Ring, Renamed, Expanded, Lifted]


@dataclass(frozen=True)
class Transformed:
    """An op's result: the new program, tau, the stated obligations, the loop names it mints and the
    declarations of the buffers it mints."""

    program: ir.Program
    tau: Tau
    obligations: tuple[Obligation, ...]
    handles: tuple[str, ...] = ()
    datamaps: tuple[DataMap, ...] = ()


@runtime_checkable
class History(Protocol):
    """What the checker reads of a schedule (``semantics.sched.Schedule`` is one): the programs
    ``programs[0] .. programs[n]`` (``initial`` is ``programs[0]``), the ``n`` transforms between them,
    the ops that made them (``history``), the sizes it binds, the list its checks are kept in, and where each op was called (``call_sites``)."""

    kernel: Any
    initial: ir.Program
    programs: list[ir.Program]
    transforms: list[Transformed]
    history: list[Any]
    sizes: dict[str, int]
    checks: list[tuple[int, Any]]
    call_sites: list[Any]
