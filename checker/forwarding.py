"""Reading through the buffers an op mints, as its datamaps declare them (``semantics.transform``).

A transform may introduce buffers with no counterpart in the old program; the op declares what each
one holds, and the checker verifies every declaration (the ``datamap`` obligation) before it compares
the programs through it: rings and copies are *restored* (each access of the buffer turned into the
access of the source cell it stands for, the transfers and the declaration dropped), forwards are
*inlined*. A fresh buffer the op does not declare leaves the comparison unknown. Nothing is guessed
from a buffer's name or shape: the statements a declaration names are found by identity.

``Forward(f, e)``: scalar ``f`` of ``e``'s dtype written by one store ``w: f[] = e`` and read by statements inside
``w``'s loops. For every reading instance ``r`` and the instance ``z`` of ``w`` sharing ``r``'s
coordinates on ``w``'s loops:

    (1) z runs before r and writes the cell r reads:   D_r => z in D_w, cell_w(z) = cell(r), HB(z, r)
    (2) no other store of f to that cell in between:    not (z2 in D_w, cell_w(z2) = cell(r), HB(z, z2), HB(z2, r))
    (3) no store to a cell e reads, in between:          not (u writes cell_e(z), HB(z, u), HB(u, r))

``Copy(f, source, u, cell, live)``: the load ``z: f[u] = source[c]`` and (unless read-only) the
store-back ``z': source[c'] = f[u]``, each over ``f``'s owner loops, then loops that index ``f`` by ``[u]``,
one per axis, or cooperatively: an axis indexed by a combination ``sum_i a_i * v_i`` of loops read as mixed
radix (in decreasing coefficient order, ``c_i`` = the product of the extents of the loops after ``v_i``, the
instance of cell ``u`` at ``v_i = (u // c_i) mod n_i``, the most significant digit unreduced), and a loop
indexing no axis pinned by ``v == k`` in the transfer's guard (a lane-0 nest); anything else is unknown. The
inverse is not trusted: for every instance ``y`` of a transfer of a cooperative form, of cell ``u(y)``,

    (i) y in D  =>  u(y) in bounds of f,  at(u(y)) = y                   one instance per cell, found by the inverse

and "the instance of cell ``u``" below is ``at(u)`` where it runs and transfers ``u``. Every other statement
accessing ``f`` is a *user*; ``cell`` reads only ``u`` and ``f``'s owner loops (else unknown).
For every load instance ``z`` (tile cell ``u``) and the store-back instance ``z'`` of the same allocation
and ``u``:

    (0) z in D_load  =>  c = cell(u)                                      the load reads the declared cell
    (1) z in D_load  =>  z' in D_store, c' = c, HB(z, z')                 every loaded cell is stored back
    (2) z' in D_store  =>  z in D_load                                    and only loaded cells are
    (3) y accesses c, y not z, z'  =>  HB(y, z) or HB(z', y)               nothing else touches c in between
    (4) user r accesses f[u], cell(u) in bounds of source
            =>  z in D_load, HB(z, r), HB(r, z')                          every use lies in its window

and for a read-only copy (no store-back, users only read ``f``): (0), (4) without ``z'``,
(3') no write ``y`` to ``c`` with ``HB(z, y)`` and ``HB(y, r)`` for a user ``r``, and (5') no write of
``source`` runs anywhere in the routine (a staged source is unwritten: a write between the uses of one
allocation and the load of the next is refused too). Then ``f[u]`` holds what ``source[cell(u)]`` holds
in the restored program wherever it is used, and after ``z'`` the two programs agree on ``c``. (4) leaves
out the uses the restored program makes out of bounds: there it fails, and so does the old program
wherever an old instance performs that access (``agreement`` ties their cells), which its ``bounds``
obligation reports.

The load of a read-only copy (and each ring fill) may also widen, ``f[u] = Cvt(source[c], p)`` with ``p``
``f``'s dtype and a widening of ``source``'s (``dtypes.widens``; a narrowing is refused), and be
edge-guarded, ``f[u] = Sel(Ix(g), X, Lit(0))`` with ``X`` either form: the cell gets ``conv(source[c])``
where ``g`` holds and 0 elsewhere. Then (0) holds under ``g``, ``z in D_load and g(z) => c = cell(u)``, and

    (g) z in D_load  =>  (g(z) <=> cell(u) in bounds of source)           the 0 slots are the out-of-range ones

A use ``f[u]`` is restored as ``conv(source[cell(u)])``, and a widening read back at its source's dtype,
``Cvt(Cvt(x, p), dtype(x))``, as ``x`` (exact). A ``zero_fringe`` claim is the separate obligation
``zero_fringe`` (``zero_fringe`` below).

``Ring(f, source, versions, k, slot, u, cell, fills, uses)``: each fill ``t`` (version ``v_t``) is
``f[s, u] = source[c]``, each use ``r`` (version ``v_r``) reads ``f[s, u]``; every statement accessing
``f`` is one of them, no use writes ``f``, ``f``'s first axis has ``versions`` slots, and ``slot`` and
``cell`` read only ``k``, ``u`` and ``f``'s owner loops. For every
use instance ``r`` reading ``f[s, u]``:

    (0) fill z:  s_z = slot(v_t(z)), g(z) => c_z = cell(v_t(z), u_z), (g) of an edge-guarded fill;
        use r:  s = slot(v_r(r))
    (1) some fill z writes r's cell with version v_r(r) before r:   D_r => exists z: cell_z = cell(r), v(z) = v_r,
                                                                                    HB(z, r)
    (2) no fill of another version overwrites it in between:         not (z as in (1), z2 writes cell(r), v(z2) != v_r,
                                                                          HB(z, z2), HB(z2, r))
    (3) nothing writes the source cell in between:                   not (z as in (1), y writes c_z, HB(z, y), HB(y, r))

so the last write of ``r``'s cell before ``r`` is a fill of version ``v_r`` that copied
``source[cell(v_r, u)]``, unchanged since: ``r`` reads what the restored load reads. A point where a
condition fails disproves the declaration, with the instances; the programs are then not compared.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.dtypes import widens
from tilecert.semantics.index import IBin, IConst, IExpr, IVar, conjuncts, free_vars, linear
from tilecert.semantics.mapper import Mapper, map_loads
from tilecert.semantics.printer import sexpr
from tilecert.semantics.transform import Copy, DataMap, Expanded, Forward, Lifted, Renamed, Ring, Tau

from .agreement import literal_key
from .allocations import restore_expanded, restore_lifted
from .correspondence import Correspondence, correspond
from .declarations import alone as _alone, decided as _decided, refused as _refused
from .formula import Const, Formula, Term, arith, cmp, conj, differ, disj, equal_all, exists, term_of
from .model import Access, BufferRec, Inst, Model, Stmt, access_guard, domain, in_bounds, index_terms, inst, same_cell
from .order import Names, happens_before
from .solve import Case
from .verdict import Verdict, proved, unknown

FORMULA = ("each buffer the op mints holds what it declares: a copy cell its source cell over its live range, a "
           "forward its expression where read, a ring slot the version its use reads")

Compared = Union[Correspondence, str]


def through_temporaries(c: Correspondence, tau: Tau, timeout_ms: int, datamaps: Sequence[DataMap] = ()) -> Compared:
    """The comparison of ``read_through`` (the correspondence, or why the fresh buffers cannot be read through)."""
    return read_through(c, tau, timeout_ms, datamaps)[0]


def read_through(c: Correspondence, tau: Tau, timeout_ms: int,
                 datamaps: Sequence[DataMap] = ()) -> tuple[Compared, Optional[Verdict]]:
    """``c`` when the transform introduced no buffer; otherwise the correspondence of the old program with the
    new one read through its declared buffers (lifted and expanded declarations restored, ``allocations.py``,
    then rings, then copies restored, then forwards inlined), or the
    reason it cannot be; and the verdict on the declarations (None when the op declares none)."""
    declared = {d.buffer: d for d in datamaps if not isinstance(d, Renamed)}
    if c.new.problems or not (c.fresh or declared):
        return c, None
    missing = sorted(set(declared) - {f.name for f in c.fresh})
    undeclared = [f.name for f in c.fresh if f.name not in declared]
    if missing or undeclared:
        why = (f"the op declares {', '.join(missing)}, which the transformed program does not declare afresh"
               if missing else f"the transform introduces buffers ({', '.join(undeclared)}) without declaring what "
                               "they hold")
        return why, unknown(why, "structure") if declared else None
    if c.new.shadows:
        why = (f"the transformed program redeclares a visible name ({c.new.shadows[0]}): reading it through its "
               "declared buffers, which rewrites accesses by name, could change which buffer an access names")
        return why, unknown(why, "structure")
    engines: set[str] = set()
    pending = list(datamaps)  # a restored declaration's buffer may keep its name: it then stands for the old one
    for stage, kind in ((restore_lifted, Lifted), (restore_expanded, Expanded), (restore_rings, Ring),
                        (restore_copies, Copy), (inline, Forward)):
        mine = [(f, declared[f.name]) for f in c.fresh if isinstance(declared.get(f.name), kind)]
        if not mine:
            continue
        pending = [d for d in pending if not isinstance(d, kind)]
        out = stage(c.new, mine, timeout_ms)
        what = f"{', '.join(f.name for f, _ in mine)} (declared {kind.__name__})"
        if isinstance(out, Verdict):
            return f"the declaration of {what} is {out.status}: {out.reason or out.witness.summary}", out
        program, engine = out
        engines.add(engine)
        m = Model(program, c.new.sizes)
        if m.problems:
            why = f"the program read through {what} is ill-formed: {m.problems[0]}"
            return why, unknown(why, "structure")
        c = correspond(c.old, m, tau, timeout_ms, pending)
    if c.fresh:
        why = (f"read through its declarations, the transformed program still declares {c.fresh[0].name} with no "
               "counterpart in the old one (its restored declaration differs)")
        return why, unknown(why, "structure")
    return c, proved("+".join(sorted(engines)))


# ----------------------------------------------------------------------------- statements a declaration names
def _statements(m: Model, *nodes: Any) -> Optional[list[Stmt]]:
    """The statements of ``m`` whose nodes are ``nodes`` (by identity); None when one is missing."""
    by_node = {id(s.node): s for s in m.statements}
    found = [by_node.get(id(n)) for n in nodes]
    return None if None in found else found


def _inside(s: Stmt, owner: tuple) -> bool:
    return len(s.loops) >= len(owner) and all(a.node is b.node for a, b in zip(s.loops, owner))


def _stray(f: BufferRec, maps: Sequence[IExpr], bound: Sequence[int]) -> Optional[Verdict]:
    """Unknown when ``maps`` (a declaration's cell and slot maps) read a loop variable outside ``bound`` and
    ``f``'s owner loops: the checker would evaluate it at a transfer, the rewrite at each access, where the
    same id may stand for another loop."""
    allowed = set(bound) | {lp.var for lp in f.owner_loops}
    stray = sorted({region for e in maps for region, _ in free_vars(e)} - allowed)
    if not stray:
        return None
    return unknown(f"the declared map of {f.name} reads loop variable(s) {', '.join(f'r{v}' for v in stray)}, "
                   f"neither its declared variables nor a loop that owns {f.name}", "structure")


def _unwritten(m: Model, x: Inst, read: Any, r: Inst, at: Any, names: Names, key: str,
               about: Callable[[Stmt], str]) -> list[Case]:
    """Cases: where ``at`` holds, no statement writes the cell that access ``read`` of ``x`` reads after ``x``
    and before ``r`` (``about(writer)`` says what a point means)."""
    out = []
    for s in m.statements:
        for k, w in enumerate(w for w in s.accesses if w.buffer is read.buffer and w.writes):
            y = inst(s, names.prefix())
            out.append(Case(f"{key}_{s.id}_{k}", conj(at, domain(m, y), access_guard(m, y, w),
                                                      same_cell(m, y, w, x, read), happens_before(m, x, y, names),
                                                      happens_before(m, y, r, names)), about=(about(s), (x, y, r))))
    return out


# ----------------------------------------------------------------------------- forwards
def inline(m: Model, fresh: list[tuple[BufferRec, Forward]], timeout_ms: int) -> Union[tuple[ir.Program, str], Verdict]:
    """The program of ``m`` with the forwards ``fresh`` inlined and the engine that proved it exact, or the
    verdict on the declarations: each must be a scalar written by one store of its declared expression."""
    values: dict[str, L.SExpr] = {}
    drop: set[int] = set()
    cases: list[Case] = []
    names = Names()
    for f, d in fresh:
        if f.shape:
            return _refused(f"forward {f.name} is not a scalar")
        if not _alone(m, f):
            return unknown(f"the name of forward {f.name} is declared twice", "structure")
        writers = [s for s in m.statements if s.target is f and s.kind != "decl"]
        if len(writers) != 1 or writers[0].kind != "assign":
            return _refused(f"forward {f.name} is not written by exactly one store")
        w = writers[0]
        if w.node.value != d.expression:
            return _refused(f"forward {f.name} is stored {sexpr(w.node.value)}, not the declared "
                            f"{sexpr(d.expression)}")
        if w.node.value.dtype != f.dtype:
            return unknown(f"forward {f.name} ({f.dtype}) is stored a {w.node.value.dtype} value: inlined, the "
                           "conversion of the store would be lost", "structure")
        readers = [s for s in m.statements if any(a.buffer is f and a.mode == "read" for a in s.accesses)]
        for s in readers:
            if len(w.loops) > len(s.loops) or any(a.node is not b.node for a, b in zip(w.loops, s.loops)):
                return unknown(f"forward {f.name} is read outside the loops of its store", "structure")
            cases += _forwarding_cases(m, f, w, s, names)
        values[f.name] = w.node.value
        drop |= {id(w.node), id(f.decl.node)}
    decided = _decided(cases, timeout_ms)
    if isinstance(decided, Verdict):
        return decided

    def statement(st: Any) -> Any:
        return dataclasses.replace(st, value=map_loads(st.value, lambda ld: values.get(ld.buf, ld)))

    return dataclasses.replace(m.program, body=_rewrite(m.program.body, statement, drop)), decided


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
                        about=(f"the store of {f.name} does not run before `{s.label()}`", (r,))))
        z2 = inst(w, "c")
        out.append(Case(f"again{key}", conj(at_r, domain(m, z), domain(m, z2), same_cell(m, z2, write, r, read),
                                            happens_before(m, z, z2, fresh), happens_before(m, z2, r, fresh)),
                        about=(f"{f.name} is stored again before `{s.label()}` reads it", (z, z2, r))))
        for k, operand in enumerate(a for a in w.accesses if a.mode == "read"):
            out += _unwritten(m, z, operand, r, conj(at_r, domain(m, z), access_guard(m, z, operand)), fresh,
                              f"op{key}_{k}", lambda t: f"{operand.buffer.name}, read into {f.name}, is written by "
                                                        f"`{t.label()}` before `{s.label()}` reads {f.name}")
    return out


# ----------------------------------------------------------------------------- copies
@dataclass(frozen=True)
class Transfer:
    """A load or store-back ``s`` of tile ``f`` as a map from its loops past ``f``'s owner loops onto tile
    cells, and its inverse: loop ``v`` of ``digits`` (``(v, axis, radix, modulus)``) is the digit
    ``(u[axis] // radix) mod modulus`` of cell ``u`` (unreduced for the most significant digit, ``modulus``
    None), loop ``v`` of ``pins`` (``(v, value)``) is pinned to ``value`` by an equality of ``s``'s guard.
    ``access`` is ``s``'s access of ``f``; ``identity`` when ``s`` indexes ``f`` by ``[u]``, one loop per axis."""

    stmt: Stmt
    access: Access
    digits: tuple[tuple[int, int, int, Optional[int]], ...]
    pins: tuple[tuple[int, int], ...]
    identity: bool


def _transfer(s: Stmt, f: BufferRec) -> Optional[Transfer]:
    """``s`` as a ``Transfer`` of ``f``, or None when it is not one: ``s`` lies inside ``f``'s owner loops
    and each axis of ``f`` is indexed by a combination ``sum_i a_i * v_i`` of the loops past them, each loop
    in one axis at most, read as mixed radix: in decreasing coefficient order, digit ``v_i`` has radix
    ``c_i``, the product of the extents of the loops after it (each from 0, of constant extent; the most
    significant one's extent is free). A loop indexing no axis is pinned by ``v == k`` (``k`` a constant) in
    ``s``'s guard. The coefficients ``a_i`` are not trusted: ``_transfer_cases`` proves that the inverse
    gives back each instance."""
    if not _inside(s, f.owner_loops):
        return None
    access = next(a for a in s.accesses if a.buffer is f)
    loops = s.loops[len(f.owner_loops):]
    if len(access.index) != len(f.shape):
        return None
    if access.index == tuple(IVar(lp.var, 0) for lp in loops):
        return Transfer(s, access, tuple((lp.var, k, 1, None) for k, lp in enumerate(loops)), (), True)
    terms: dict[int, tuple[int, int]] = {}  # loop var -> (axis, coefficient)
    for k, e in enumerate(access.index):
        for lp in loops:
            found = linear(e, lp.var)
            if found is None or (found[0] and lp.var in terms):
                return None
            if found[0]:
                terms[lp.var] = (k, found[0])
            e = found[1]
        if e != IConst(0):
            return None
    equalities = dict((c.a.region, c.b.value) for g in s.guards for c in conjuncts(g)
                      if isinstance(c, IBin) and c.op == "eq" and isinstance(c.a, IVar) and c.a.axis == 0
                      and isinstance(c.b, IConst))
    pins = tuple((lp.var, equalities[lp.var]) for lp in loops if lp.var not in terms and lp.var in equalities)
    if len(pins) + len(terms) != len(loops):
        return None
    digits = []
    for k in range(len(f.shape)):
        axis = sorted((lp for lp in loops if lp.var in terms and terms[lp.var][0] == k),
                      key=lambda lp: -terms[lp.var][1])
        radix = 1
        for i in reversed(range(len(axis))):
            lp = axis[i]
            if lp.node.start != IConst(0) or (i and not isinstance(lp.node.extent, IConst)):
                return None
            modulus = lp.node.extent.value if i else None
            digits.append((lp.var, k, radix, modulus))
            radix *= modulus or 1
    return Transfer(s, access, tuple(digits), pins, False)


@dataclass(frozen=True)
class Tile:
    """A declared copy ``f`` of ``source``: ``load`` copies ``f[u] = source[c]`` and ``store`` (None when
    read-only) ``source[c'] = f[u]``, each a ``Transfer`` (over ``f``'s owner loops, then loops mapped onto
    tile cells ``u``); every other statement accessing ``f`` is a *user*."""

    f: BufferRec
    source: BufferRec
    copy: Copy
    load: Stmt
    store: Optional[Stmt]
    users: tuple[Stmt, ...]
    transfers: tuple[Transfer, ...]

    def transfer(self, s: Stmt) -> Transfer:
        return next(t for t in self.transfers if t.stmt is s)

    def at(self, s: Stmt, x: Inst, u: list[Term]) -> Inst:
        """The instance of transfer ``s`` (load or store) on the allocation of ``x`` at tile cell ``u``: the
        inverse of its map onto tile cells (``ran`` says whether it runs and transfers ``u``)."""
        t = self.transfer(s)
        at = {v: x.at[v] for v in s.vars[:len(self.f.owner_loops)]}
        for v, axis, radix, modulus in t.digits:
            digit = arith("floordiv", u[axis], Const(radix))
            at[v] = digit if modulus is None else arith("mod", digit, Const(modulus))
        return Inst(s, {**at, **{v: Const(value) for v, value in t.pins}})

    def ran(self, m: Model, x: Inst, u: list[Term]) -> Formula:
        """Transfer instance ``x`` (``at(.., u)``) runs and transfers tile cell ``u``."""
        t = self.transfer(x.stmt)
        return domain(m, x) if t.identity else conj(domain(m, x), equal_all(index_terms(m, x, t.access), u))


def _fill_form(s: Stmt, f: BufferRec, source: str, what: str) -> Optional[Verdict]:
    """None when the value of load (or fill) ``s`` of ``f`` (``what`` names it) has an accepted form, else the
    verdict:

        source[c]                                  of ``f``'s dtype
        Cvt(source[c], p)                          ``p`` = ``f``'s dtype, a widening of ``source``'s (``widens``)
        Sel(Ix(g), X, Lit(0, f's dtype))           ``X`` one of the above: where ``g`` fails the cell gets 0

    A narrowing, another operation or another fringe value is refused; a value whose dtype is not ``f``'s
    (the store would convert it again, which restoring drops) is unknown."""
    if s.kind != "assign" or s.target is not f:
        return _refused(f"{what} does not copy {source} into it")
    value, dtypes = s.node.value, [s.node.value.dtype]
    if isinstance(value, L.Sel) and isinstance(value.cond, L.Ix) and value.cond.dtype == "bool":
        if not (isinstance(value.b, L.Lit) and literal_key(value.b) == literal_key(L.Lit(0, f.dtype))):
            return _refused(f"{what} stores {sexpr(value.b)} where its edge guard fails, not 0")
        value = value.a
        dtypes.append(value.dtype)
    widened = value.dtype if isinstance(value, L.Cvt) else None
    read = value.x if isinstance(value, L.Cvt) else value
    if not isinstance(read, L.Ld) or read.buf != source:
        return _refused(f"{what} does not copy {source} into it")
    src = s.accesses[0].buffer
    if widened is not None and not widens(src.dtype, widened):
        return _refused(f"{what} converts {source} ({src.dtype}) to {widened}, not a widening: "
                        f"{f.name} would hold other values than {source}")
    if read.dtype != src.dtype or set(dtypes) | {widened or src.dtype} != {f.dtype}:
        return unknown(f"{what} stores a value converted to another dtype than {f.name}'s "
                       f"({f.dtype}): restored, the conversion would be lost", "structure")
    return None


def _restored(source: BufferRec, cell: tuple[IExpr, ...], dtype: str) -> L.SExpr:
    """What a load of a tile cell of ``dtype`` standing for ``source[cell]`` reads once restored:
    ``conv(source[cell])``, the conversion to ``dtype`` when it is not ``source``'s."""
    ld = L.Ld(source.name, cell, source.dtype)
    return ld if dtype == source.dtype else L.Cvt(ld, dtype)


class _Restored(Mapper):
    """An expression with each load ``ld`` replaced by ``load(ld)``, and ``Cvt(ld, q)`` by ``x`` where ``load(ld)``
    is ``Cvt(x, p)``, ``x`` of dtype ``q`` and ``p`` a float widening of ``q``: a widened tile read back at its
    source's dtype. Exact: the widening loses nothing, so converting back gives every value (NaN payloads
    aside) unchanged (``widens``; the tests run it on every f16 and bf16 value). No other conversion is
    touched."""

    def __init__(self, load: Callable[[L.Ld], L.SExpr]) -> None:
        self.load = load

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return self.load(e)

    def map_cvt(self, e: L.Cvt) -> L.SExpr:
        inner = self.load(e.x) if isinstance(e.x, L.Ld) else None
        if isinstance(inner, L.Cvt) and inner.x.dtype == e.dtype != inner.dtype and widens(e.dtype, inner.dtype):
            return inner.x
        return super().map_cvt(e)


def _restoring(st: Any, load: Callable[[L.Ld], L.SExpr]) -> Any:
    """Statement ``st`` with its value ``_Restored`` by ``load``."""
    value = _Restored(load).map_sexpr(st.value)
    return dataclasses.replace(st, value=value) if value is not st.value else st


def _guard_cases(m: Model, z: Inst, read: Any, cell: list[Term], source: BufferRec, key: str, what: str) -> list[Case]:
    """An edge-guarded load ``z`` (guard ``g``, the select condition of its ``read``) of ``cell``: ``g`` holds
    exactly where ``cell`` is in bounds of ``source``, so the slots it stores 0 to are the out-of-range ones."""
    g, inside = conj(domain(m, z), access_guard(m, z, read)), in_bounds(m, z, cell, source)
    return [Case(f"wide{key}", g, inside,
                 about=(f"the edge guard of {what} holds at a cell out of bounds of {source.name}", (z,))),
            Case(f"narrow{key}", conj(domain(m, z), inside), access_guard(m, z, read),
                 about=(f"the edge guard of {what} fails at a cell in bounds of {source.name}: it stores 0 there",
                        (z,)))]


def tile_from(m: Model, f: BufferRec, d: Copy) -> Union[Tile, Verdict]:
    """``f`` as the copy ``d`` declares it, or the verdict that it is not one: the declared load and
    store-back are transfers between ``f`` and ``d.source`` (the load in a form ``_fill_form`` accepts,
    plain when there is a store-back), every access of ``f`` lies inside its owner loops, a read-only copy
    is only read, neither name is shadowed."""
    found = _statements(m, d.live.load, *(() if d.live.store is None else (d.live.store,)))
    if found is None:
        return unknown(f"a transfer the op declares for {f.name} is not in the transformed program", "structure")
    load, store = found[0], (found[1] if len(found) > 1 else None)
    stray = _stray(f, d.cell, d.axes)
    if stray is not None:
        return stray
    form = _fill_form(load, f, d.source, f"the declared load of {f.name}, `{load.label()}`,")
    if form is not None:
        return form
    if store is not None and (store.kind != "assign" or store.node.buf != d.source
                              or not isinstance(store.node.value, L.Ld)
                              or store.node.value.buf != f.name):
        return _refused(f"the declared store-back of {f.name}, `{store.label()}`, does not copy it to {d.source}")
    transfers = tuple(_transfer(s, f) for s in (load, store) if s is not None)
    if None in transfers:
        return unknown(f"the transfers of {f.name} do not copy one cell per instance over loops mapped onto its "
                       "axes (one loop per axis, or a mixed-radix combination, other loops pinned by its guard)",
                       "structure")
    if store is not None and not isinstance(load.node.value, L.Ld):
        return unknown(f"the load of {f.name}, which is stored back, converts or guards what it copies",
                       "structure")
    users = [s for s in m.statements if s.kind != "decl" and s is not load and s is not store
             and any(a.buffer is f for a in s.accesses)]
    if not all(_inside(s, f.owner_loops) for s in users):
        return unknown(f"{f.name} is accessed outside the loops that own it", "structure")
    writer = next((s for s in users if s.target is f), None)
    if writer is not None and (store is None or d.zero_fringe):
        return _refused(f"{'zero-fringed' if store is not None else 'read-only'} copy {f.name} is written by "
                        f"`{writer.label()}`")
    source = load.accesses[0].buffer
    if not _alone(m, f, source):
        return unknown(f"{f.name} or {d.source} is declared twice", "structure")
    return Tile(f, source, d, load, store, tuple(users), transfers)


def restore_copies(m: Model, fresh: list[tuple[BufferRec, Copy]],
                   timeout_ms: int) -> Union[tuple[ir.Program, str], Verdict]:
    """The program of ``m`` with every copy ``f`` replaced by its source (``f[t]`` read and written as
    ``source[cell(t)]``, the transfers and ``f``'s declaration dropped) and the engine that proved it exact,
    or the verdict on the declarations."""
    tiles = [tile_from(m, f, d) for f, d in fresh]
    wrong = next((t for t in tiles if isinstance(t, Verdict)), None)
    if wrong is not None:
        return wrong
    names = Names()
    decided = _decided([case for t in tiles for case in _tile_cases(m, t, names)], timeout_ms)
    if isinstance(decided, Verdict):
        return decided
    by_name = {t.f.name: t for t in tiles}

    def load(ld: L.Ld) -> L.SExpr:
        t = by_name.get(ld.buf)
        return _restored(t.source, t.copy.cell_at(ld.index), t.f.dtype) if t is not None else ld

    def statement(st: Any) -> Any:
        st = _restoring(st, load)
        t = by_name.get(st.buf)
        return dataclasses.replace(st, buf=t.source.name, index=t.copy.cell_at(st.index)) if t is not None else st

    drop = {id(s.node) for t in tiles for s in (t.load, t.store, t.f.decl) if s is not None}
    return dataclasses.replace(m.program, body=_rewrite(m.program.body, statement, drop)), decided


def _tile_cases(m: Model, t: Tile, names: Names) -> list[Case]:
    """Conditions (0)-(4) (or (0), (3'), (4) for a read-only copy) of tile ``t``, for every load instance
    ``z`` and the store-back instance ``z'`` of the same allocation and tile cell."""
    key = f"tile{t.f.decl.id}"
    read = t.load.accesses[0]
    z = inst(t.load, names.prefix())
    u = index_terms(m, z, t.transfer(t.load).access)
    declared = _declared_cell(m, t, z)
    cases = [case for tr in t.transfers if not tr.identity for case in _transfer_cases(m, t, tr, key, names)]
    cases += [Case(f"cell{key}", conj(domain(m, z), access_guard(m, z, read)),
                  equal_all(index_terms(m, z, read), declared),
                  about=(f"the load of {t.f.name} reads a cell of {t.source.name} other than the declared one", (z,)))]
    if read.guards:
        cases += _guard_cases(m, z, read, declared, t.source, key, f"the load of {t.f.name}")
    if t.store is not None:
        write = t.store.accesses[-1]
        zs = t.at(t.store, z, u)
        window = conj(domain(m, z), t.ran(m, zs, u))
        y = inst(t.store, names.prefix())
        u_y = index_terms(m, y, t.transfer(t.store).access)
        cases += [Case(f"stored{key}", domain(m, z), conj(t.ran(m, zs, u), same_cell(m, zs, write, z, read),
                                                          happens_before(m, z, zs, names)),
                       about=(f"a cell of {t.f.name} loaded from {t.source.name} is not stored back to it afterwards",
                              (z,))),
                  Case(f"loaded{key}", domain(m, y), t.ran(m, t.at(t.load, y, u_y), u_y),
                       about=(f"a cell of {t.f.name} is stored to {t.source.name} without being loaded from it",
                              (y,)))]
        for s in m.statements:
            for j, a in enumerate(a for a in s.accesses if a.buffer is t.source):
                y = inst(s, names.prefix())
                distinct = [differ(y.coords(), x.coords()) for x in (z, zs) if x.stmt is s]
                cases.append(Case(f"alone{key}_{s.id}_{j}",
                                  conj(window, domain(m, y), access_guard(m, y, a), same_cell(m, y, a, z, read),
                                       *distinct),
                                  disj(happens_before(m, y, z, names), happens_before(m, zs, y, names)),
                                  about=(f"`{s.label()}` accesses a cell of {t.source.name} while {t.f.name} holds it",
                                         (z, y, zs))))
    for s in t.users:
        for j, a in enumerate(a for a in s.accesses if a.buffer is t.f):
            r = inst(s, names.prefix())
            cell = index_terms(m, r, a)
            zr = t.at(t.load, r, cell)
            restored = [term_of(e, m.env(r.at)) for e in t.copy.cell_at(a.index)]
            at_r = conj(domain(m, r), access_guard(m, r, a), in_bounds(m, r, restored, t.source))
            after = conj(t.ran(m, zr, cell), happens_before(m, zr, r, names))
            if t.store is not None:
                after = conj(after, happens_before(m, r, t.at(t.store, r, cell), names))
            cases.append(Case(f"inside{key}_{s.id}_{j}", at_r, after,
                              about=(f"`{s.label()}` accesses a cell of {t.f.name} outside its live range", (r,))))
            if t.store is not None:
                continue
            cases += _unwritten(m, zr, read, r, conj(at_r, t.ran(m, zr, cell)), names, f"written{key}_{s.id}_{j}",
                                lambda y: f"`{y.label()}` writes a cell of {t.source.name} that read-only copy "
                                          f"{t.f.name} holds, before `{s.label()}` reads it")
    if t.store is None:
        cases += _source_writes(m, t, key, names)
    return cases


def _transfer_cases(m: Model, t: Tile, tr: Transfer, key: str, names: Names) -> list[Case]:
    """(i) Every instance ``y`` of transfer ``tr`` of tile ``t`` transfers a cell ``u`` of the tile, and is the
    instance the inverse gives for ``u``: ``y in D  =>  u in bounds of f, at(u) = y`` (so one instance per
    cell: the map onto tile cells is one-to-one, its inverse the one ``at`` computes)."""
    y = inst(tr.stmt, names.prefix())
    u = index_terms(m, y, tr.access)
    back = t.at(tr.stmt, y, u)
    what = f"`{tr.stmt.label()}`"
    return [Case(f"intile{key}_{tr.stmt.id}", domain(m, y), in_bounds(m, y, u, t.f),
                 about=(f"{what} transfers a cell out of bounds of {t.f.name}", (y,))),
            Case(f"inverse{key}_{tr.stmt.id}", domain(m, y), equal_all(back.coords(), y.coords()),
                 about=(f"{what} is not the one instance of its cell of {t.f.name} that the mixed-radix inverse "
                        "gives: two instances share the cell, or the index skips cells", (y, back)))]


def _declared_cell(m: Model, t: Tile, z: Inst) -> list[Term]:
    """``cell(u)`` at load instance ``z`` of tile ``t`` (``u`` the tile cell it writes)."""
    return [term_of(e, m.env(z.at)) for e in t.copy.cell_at(t.transfer(t.load).access.index)]


def _source_writes(m: Model, t: Tile, key: str, names: Names) -> list[Case]:
    """(5') The source of read-only copy ``t`` is written nowhere in the routine: no instance of any write
    of it runs (a write between two loads, outside every window (3') watches, is one too)."""
    out = []
    for s in m.statements:
        for k, w in enumerate(w for w in s.accesses if w.buffer is t.source and w.writes):
            y = inst(s, names.prefix())
            out.append(Case(f"unwritten{key}_{s.id}_{k}", conj(domain(m, y), access_guard(m, y, w)),
                            about=(f"`{s.label()}` writes {t.source.name}, the source of read-only copy {t.f.name}",
                                   (y,))))
    return out


# ----------------------------------------------------------------------------- rings
@dataclass(frozen=True)
class RingUse:
    """One fill or use of a ring: its statement, the version it writes or reads, its access of the ring."""

    stmt: Stmt
    version: IExpr
    access: Any


def _ring_uses(m: Model, f: BufferRec, d: Ring) -> Union[tuple[list[RingUse], list[RingUse]], Verdict]:
    """The declared fills and uses of ring ``f`` (each use once per load of the ring), or the verdict that
    the declaration does not describe the program: every access of ``f`` is by a declared fill
    (``f[..] = source[..]``, in a form ``_fill_form`` accepts) or use (which only reads ``f``), inside ``f``'s
    owner loops."""
    fill_stmts = _statements(m, *(n for n, _ in d.fills))
    use_stmts = _statements(m, *(n for n, _ in d.uses))
    if fill_stmts is None or use_stmts is None:
        return unknown(f"a statement the op declares for ring {f.name} is not in the transformed program", "structure")
    if not fill_stmts:
        return _refused(f"ring {f.name} is declared with no fill")
    if f.shape[:1] != (IConst(d.versions),):
        return _refused(f"ring {f.name} is declared with {d.versions} slots but allocates "
                        f"[{', '.join(map(str, f.shape))}]")
    stray = _stray(f, (d.slot, *d.cell), (d.var, *d.axes))
    if stray is not None:
        return stray
    declared = {id(s) for s in fill_stmts + use_stmts}
    other = next((s for s in m.statements if s.kind != "decl" and id(s) not in declared
                  and any(a.buffer is f for a in s.accesses)), None)
    if other is not None:
        return _refused(f"`{other.label()}` accesses ring {f.name} but is neither a declared fill nor a use")
    for s in fill_stmts:
        form = _fill_form(s, f, d.source, f"the declared fill `{s.label()}`")
        if form is not None:
            return form
        if len(s.node.index) != 1 + len(d.axes):
            return _refused(f"the declared fill `{s.label()}` does not copy {d.source} into a slot of {f.name}")
    for s in use_stmts:
        if s.target is f:
            return _refused(f"the declared use `{s.label()}` writes ring {f.name}")
    if not all(_inside(s, f.owner_loops) for s in fill_stmts + use_stmts) or not _alone(m, f):
        return unknown(f"ring {f.name} is accessed outside its owner loops or its name is declared twice", "structure")
    fills = [RingUse(s, v, s.accesses[-1]) for s, (_, v) in zip(fill_stmts, d.fills)]
    uses = [RingUse(s, v, a) for s, (_, v) in zip(use_stmts, d.uses) for a in s.accesses
            if a.buffer is f and a.mode == "read"]
    return fills, uses


def _version(m: Model, x: Inst, use: RingUse) -> Term:
    return term_of(use.version, m.env(x.at))


def _fill_cell(m: Model, d: Ring, t: RingUse, z: Inst) -> list[Term]:
    """``cell(v, u)`` at instance ``z`` of fill ``t`` (``v`` its version, ``u`` its index past the slot)."""
    return [term_of(e, m.env(z.at)) for e in d.cell_of(t.version, t.stmt.node.index[1:])]


def _ring_cases(m: Model, f: BufferRec, d: Ring, fills: list[RingUse], uses: list[RingUse],
                names: Names) -> list[Case]:
    """Conditions (0)-(3) of ring ``f``."""
    key = f"ring{f.decl.id}"
    cases = []
    for i, t in enumerate(fills):
        z = inst(t.stmt, names.prefix())
        v, read, cell = t.version, t.stmt.accesses[0], _fill_cell(m, d, t, z)
        about = (f"`{t.stmt.label()}` does not fill the slot of its version with the declared cell of {d.source}",
                 (z,))
        cases += [Case(f"fill{key}_{i}", domain(m, z),
                       cmp("eq", index_terms(m, z, t.access)[0], term_of(d.slot_of(v), m.env(z.at))), about=about),
                  Case(f"fillcell{key}_{i}", conj(domain(m, z), access_guard(m, z, read)),
                       equal_all(index_terms(m, z, read), cell), about=about)]
        if read.guards:
            cases += _guard_cases(m, z, read, cell, read.buffer, f"{key}_{i}", f"`{t.stmt.label()}`")
    for j, r_use in enumerate(uses):
        r = inst(r_use.stmt, names.prefix())
        v_r, at_r = _version(m, r, r_use), conj(domain(m, r), access_guard(m, r, r_use.access))
        slot = term_of(d.slot_of(r_use.version), m.env(r.at))
        cases.append(Case(f"slot{key}_{j}", at_r, cmp("eq", index_terms(m, r, r_use.access)[0], slot),
                          about=(f"`{r_use.stmt.label()}` reads a slot of {f.name} other than its version's", (r,))))

        def filled(t: RingUse, z: Inst) -> Any:
            return conj(domain(m, z), same_cell(m, z, t.access, r, r_use.access), cmp("eq", _version(m, z, t), v_r),
                        happens_before(m, z, r, names))

        found = [exists(z.owned(), filled(t, z)) for t in fills for z in (inst(t.stmt, names.prefix()),)]
        cases.append(Case(f"filled{key}_{j}", at_r, disj(*found),
                          about=(f"no fill of the version `{r_use.stmt.label()}` reads comes before it", (r,))))
        for a, t in enumerate(fills):
            z = inst(t.stmt, names.prefix())
            for b, t2 in enumerate(fills):
                z2 = inst(t2.stmt, names.prefix())
                cases.append(Case(f"over{key}_{j}_{a}_{b}",
                                  conj(at_r, filled(t, z), domain(m, z2), same_cell(m, z2, t2.access, r, r_use.access),
                                       cmp("ne", _version(m, z2, t2), v_r), happens_before(m, z, z2, names),
                                       happens_before(m, z2, r, names)),
                                  about=(f"a fill of another version overwrites the slot `{r_use.stmt.label()}` reads "
                                         "after its version was filled", (z, z2, r))))
            cases += _unwritten(m, z, t.stmt.accesses[0], r, conj(at_r, filled(t, z)), names, f"src{key}_{j}_{a}",
                                lambda y: f"`{y.label()}` writes the cell of {d.source} a slot holds before "
                                          f"`{r_use.stmt.label()}` reads it")
    return cases


def restore_rings(m: Model, fresh: list[tuple[BufferRec, Ring]],
                  timeout_ms: int) -> Union[tuple[ir.Program, str], Verdict]:
    """The program of ``m`` with every ring's uses reading the source cell of their version (fills and the
    declaration dropped) and the engine that proved it exact, or the verdict on the declarations."""
    names, cases, drop = Names(), [], set()
    versions: dict[int, tuple[Ring, IExpr, BufferRec]] = {}  # id(use node) -> its ring, version and source
    for f, d in fresh:
        found = _ring_uses(m, f, d)
        if isinstance(found, Verdict):
            return found
        fills, uses = found
        cases += _ring_cases(m, f, d, fills, uses, names)
        drop |= {id(t.stmt.node) for t in fills} | {id(f.decl.node)}
        versions |= {id(u.stmt.node): (d, u.version, fills[0].stmt.accesses[0].buffer) for u in uses}
    decided = _decided(cases, timeout_ms)
    if isinstance(decided, Verdict):
        return decided

    def statement(st: Any) -> Any:
        if id(st) not in versions:
            return st
        d, v, source = versions[id(st)]

        def load(ld: L.Ld) -> L.SExpr:
            return _restored(source, d.cell_of(v, ld.index[1:]), ld.dtype) if ld.buf == d.buffer else ld

        return _restoring(st, load)

    return dataclasses.replace(m.program, body=_rewrite(m.program.body, statement, drop)), decided


# ----------------------------------------------------------------------------- zero fringe
ZERO_FRINGE = ("a zero-fringed tile holds 0 at every cell whose source cell is out of bounds: only its loads write it, "
               "each storing 0 exactly there")


def zero_fringe(m: Model, datamaps: Sequence[DataMap], timeout_ms: int) -> Verdict:
    """The ``zero_fringe`` claims of ``datamaps`` on the transformed program ``m``: a cell of a zero-fringed copy
    or ring whose source cell is out of bounds holds 0 wherever it is read. Its allocation holds 0 everywhere,
    only its declared loads (fills) write it (``tile_from``, ``_ring_uses``), and every load instance ``z`` of
    tile cell ``u`` stores 0 where ``cell(u)`` is out of bounds:

        edge-guarded (``Sel(Ix(g), X, 0)``):   z in D_load  =>  (g(z) <=> cell(u) in bounds of source)
        unguarded:                              z in D_load  =>  cell(u) in bounds of source   (no fringe cell)
    """
    names, cases = Names(), []
    for d in datamaps:
        if not isinstance(d, (Copy, Ring)) or not d.zero_fringe:
            continue
        recs = [b for b in m.buffers if b.name == d.buffer and b.decl is not None]
        if len(recs) != 1:
            return unknown(f"zero-fringed {d.buffer} is not declared exactly once in the transformed program",
                           "structure")
        f = recs[0]
        if isinstance(d, Copy):
            t = tile_from(m, f, d)
            if isinstance(t, Verdict):
                return t
            z = inst(t.load, names.prefix())
            loads = [(z, t.load, _declared_cell(m, t, z))]
        else:
            found = _ring_uses(m, f, d)
            if isinstance(found, Verdict):
                return found
            loads = [(z, fill.stmt, _fill_cell(m, d, fill, z)) for fill in found[0]
                     for z in (inst(fill.stmt, names.prefix()),)]
        for k, (z, s, cell) in enumerate(loads):
            key, read = f"zero{f.decl.id}_{k}", s.accesses[0]
            if read.guards:
                cases += _guard_cases(m, z, read, cell, read.buffer, key, f"`{s.label()}`")
                continue
            cases.append(Case(f"bare{key}", domain(m, z), in_bounds(m, z, cell, read.buffer),
                              about=(f"`{s.label()}` copies a cell out of bounds of {read.buffer.name} into "
                                     f"zero-fringed {f.name}, with no edge guard storing 0 there", (z,))))
    decided = _decided(cases, timeout_ms)
    return decided if isinstance(decided, Verdict) else proved(decided)


# ----------------------------------------------------------------------------- rewriting
def _rewrite(block: ir.Block, statement: Callable[[Any], Any], drop: set[int]) -> ir.Block:
    """``block`` with every store or update ``st`` replaced by ``statement(st)``, the statements in ``drop``
    left out and the loops and guards they leave empty removed."""
    return _Forwarded(statement, drop).map_block(block)


class _Forwarded(Mapper):
    def __init__(self, statement: Callable[[Any], Any], drop: set[int]) -> None:
        self.statement, self.drop = statement, drop

    def map_stmt(self, st: Any) -> Any:
        return None if id(st) in self.drop else super().map_stmt(st)

    def map_assign(self, st: L.Assign) -> Any:
        return self.statement(st)

    def map_accum(self, st: L.Accum) -> Any:
        return self.statement(st)

    def map_loop(self, st: L.Loop) -> Any:
        return self._unless_emptied(st, super().map_loop(st))

    def map_if(self, st: L.If) -> Any:
        return self._unless_emptied(st, super().map_if(st))

    @staticmethod
    def _unless_emptied(old: Any, new: Any) -> Any:
        return new if new.body.ops or not old.body.ops else None
