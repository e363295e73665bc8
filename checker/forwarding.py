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
store-back ``z': source[c'] = f[u]``, each over ``f``'s owner loops and one loop per axis of ``f``; every
other statement accessing ``f`` is a *user*; ``cell`` reads only ``u`` and ``f``'s owner loops (else unknown).
For every load instance ``z`` (tile cell ``u``) and the store-back instance ``z'`` of the same allocation
and ``u``:

    (0) z in D_load  =>  c = cell(u)                                      the load reads the declared cell
    (1) z in D_load  =>  z' in D_store, c' = c, HB(z, z')                 every loaded cell is stored back
    (2) z' in D_store  =>  z in D_load                                    and only loaded cells are
    (3) y accesses c, y not z, z'  =>  HB(y, z) or HB(z', y)               nothing else touches c in between
    (4) user r accesses f[u], cell(u) in bounds of source
            =>  z in D_load, HB(z, r), HB(r, z')                          every use lies in its window

and for a read-only copy (no store-back, users only read ``f``): (0), (4) without ``z'``, and
(3') no write ``y`` to ``c`` with ``HB(z, y)`` and ``HB(y, r)`` for a user ``r``. Then ``f[u]`` holds
what ``source[cell(u)]`` holds in the restored program wherever it is used, and after ``z'`` the two
programs agree on ``c``. (4) leaves out the uses the restored program makes out of bounds: there it
fails, and so does the old program wherever an old instance performs that access (``agreement`` ties
their cells), which its ``bounds`` obligation reports.

``Ring(f, source, versions, k, slot, u, cell, fills, uses)``: each fill ``t`` (version ``v_t``) is
``f[s, u] = source[c]``, each use ``r`` (version ``v_r``) reads ``f[s, u]``; every statement accessing
``f`` is one of them, no use writes ``f``, ``f``'s first axis has ``versions`` slots, and ``slot`` and
``cell`` read only ``k``, ``u`` and ``f``'s owner loops. For every
use instance ``r`` reading ``f[s, u]``:

    (0) fill z:  s_z = slot(v_t(z)), c_z = cell(v_t(z), u_z);   use r:  s = slot(v_r(r))
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
from tilecert.semantics.index import IConst, IExpr, IVar, free_vars
from tilecert.semantics.mapper import Mapper, map_loads
from tilecert.semantics.printer import sexpr
from tilecert.semantics.transform import Copy, DataMap, Expanded, Forward, Lifted, Renamed, Ring, Tau

from .allocations import restore_expanded, restore_lifted
from .correspondence import Correspondence, correspond
from .declarations import alone as _alone, decided as _decided, refused as _refused
from .formula import Term, cmp, conj, differ, disj, equal_all, exists, term_of
from .model import BufferRec, Inst, Model, Stmt, access_guard, domain, in_bounds, index_terms, inst, same_cell
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
class Tile:
    """A declared copy ``f`` of ``source``: ``load`` copies ``f[u] = source[c]`` and ``store`` (None when
    read-only) ``source[c'] = f[u]``, each over ``f``'s owner loops then one loop per axis of ``f`` (``u``,
    in order); every other statement accessing ``f`` is a *user*."""

    f: BufferRec
    source: BufferRec
    copy: Copy
    load: Stmt
    store: Optional[Stmt]
    users: tuple[Stmt, ...]

    def at(self, s: Stmt, x: Inst, u: list[Term]) -> Inst:
        """The instance of transfer ``s`` (load or store) on the allocation of ``x`` at tile cell ``u``."""
        n = len(self.f.owner_loops)
        return Inst(s, {**{v: x.at[v] for v in s.vars[:n]}, **dict(zip(s.vars[n:], u))})


def _is_transfer(s: Stmt, f: BufferRec, dst: str, src: str) -> bool:
    """``s`` is ``dst[..] = src[..]`` with ``f``'s side indexed ``[u]`` by the loops past ``f``'s owner
    loops, one per axis of ``f``, inside them."""
    if s.kind != "assign" or not isinstance(s.node.value, L.Ld) or not _inside(s, f.owner_loops):
        return False
    u = tuple(IVar(lp.var, 0) for lp in s.loops[len(f.owner_loops):])
    tile_index = s.node.index if dst == f.name else s.node.value.index
    return s.node.buf == dst and s.node.value.buf == src and len(u) == len(f.shape) and tile_index == u


def tile_from(m: Model, f: BufferRec, d: Copy) -> Union[Tile, Verdict]:
    """``f`` as the copy ``d`` declares it, or the verdict that it is not one: the declared load and
    store-back are transfers between ``f`` and ``d.source`` of one dtype, every access of ``f`` lies inside
    its owner loops, a read-only copy is only read, neither name is shadowed."""
    found = _statements(m, d.live.load, *(() if d.live.store is None else (d.live.store,)))
    if found is None:
        return unknown(f"a transfer the op declares for {f.name} is not in the transformed program", "structure")
    load, store = found[0], (found[1] if len(found) > 1 else None)
    stray = _stray(f, d.cell, d.axes)
    if stray is not None:
        return stray
    if load.kind != "assign" or load.target is not f or not isinstance(load.node.value, L.Ld) \
            or load.node.value.buf != d.source:
        return _refused(f"the declared load of {f.name}, `{load.label()}`, does not copy {d.source} into it")
    if store is not None and (store.kind != "assign" or store.node.buf != d.source
                              or not isinstance(store.node.value, L.Ld)
                              or store.node.value.buf != f.name):
        return _refused(f"the declared store-back of {f.name}, `{store.label()}`, does not copy it to {d.source}")
    if not _is_transfer(load, f, f.name, d.source) or (store is not None and not _is_transfer(store, f, d.source,
                                                                                             f.name)):
        return unknown(f"the transfers of {f.name} do not copy one cell per instance over one loop per axis",
                       "structure")
    users = [s for s in m.statements if s.kind != "decl" and s is not load and s is not store
             and any(a.buffer is f for a in s.accesses)]
    if not all(_inside(s, f.owner_loops) for s in users):
        return unknown(f"{f.name} is accessed outside the loops that own it", "structure")
    writer = next((s for s in users if s.target is f), None)
    if store is None and writer is not None:
        return _refused(f"read-only copy {f.name} is written by `{writer.label()}`")
    source = load.accesses[0].buffer
    if source.dtype != f.dtype or not _alone(m, f, source):
        return unknown(f"{f.name} and {d.source} differ in dtype or one of their names is declared twice",
                       "structure")
    return Tile(f, source, d, load, store, tuple(users))


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
        return L.Ld(t.source.name, t.copy.cell_at(ld.index), ld.dtype) if t is not None else ld

    def statement(st: Any) -> Any:
        st = dataclasses.replace(st, value=map_loads(st.value, load))
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
    u = z.coords()[len(t.f.owner_loops):]
    declared = [term_of(e, m.env(z.at))
                for e in t.copy.cell_at(tuple(IVar(v, 0) for v in t.load.vars[len(t.f.owner_loops):]))]
    cases = [Case(f"cell{key}", domain(m, z), equal_all(index_terms(m, z, read), declared),
                  about=(f"the load of {t.f.name} reads a cell of {t.source.name} other than the declared one", (z,)))]
    if t.store is not None:
        write = t.store.accesses[-1]
        zs = t.at(t.store, z, u)
        window = conj(domain(m, z), domain(m, zs))
        cases += [Case(f"stored{key}", domain(m, z), conj(domain(m, zs), same_cell(m, zs, write, z, read),
                                                          happens_before(m, z, zs, names)),
                       about=(f"a cell of {t.f.name} loaded from {t.source.name} is not stored back to it afterwards",
                              (z,))),
                  Case(f"loaded{key}", domain(m, zs), domain(m, z),
                       about=(f"a cell of {t.f.name} is stored to {t.source.name} without being loaded from it",
                              (zs,)))]
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
            after = conj(domain(m, zr), happens_before(m, zr, r, names))
            if t.store is not None:
                after = conj(after, happens_before(m, r, t.at(t.store, r, cell), names))
            cases.append(Case(f"inside{key}_{s.id}_{j}", at_r, after,
                              about=(f"`{s.label()}` accesses a cell of {t.f.name} outside its live range", (r,))))
            if t.store is not None:
                continue
            cases += _unwritten(m, zr, read, r, conj(at_r, domain(m, zr)), names, f"written{key}_{s.id}_{j}",
                                lambda y: f"`{y.label()}` writes a cell of {t.source.name} that read-only copy "
                                          f"{t.f.name} holds, before `{s.label()}` reads it")
    return cases


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
    (``f[..] = source[..]``) or use (which only reads ``f``), inside ``f``'s owner loops."""
    fill_stmts = _statements(m, *(n for n, _ in d.fills))
    use_stmts = _statements(m, *(n for n, _ in d.uses))
    if fill_stmts is None or use_stmts is None:
        return unknown(f"a statement the op declares for ring {f.name} is not in the transformed program", "structure")
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
        if s.kind != "assign" or s.target is not f or not isinstance(s.node.value, L.Ld) \
                or s.node.value.buf != d.source or len(s.node.index) != 1 + len(d.axes):
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


def _ring_cases(m: Model, f: BufferRec, d: Ring, fills: list[RingUse], uses: list[RingUse],
                names: Names) -> list[Case]:
    """Conditions (0)-(3) of ring ``f``."""
    key = f"ring{f.decl.id}"
    cases = []
    for i, t in enumerate(fills):
        z = inst(t.stmt, names.prefix())
        v, idx = t.version, t.stmt.node.index
        want = [term_of(d.slot_of(v), m.env(z.at))] + [term_of(e, m.env(z.at)) for e in d.cell_of(v, idx[1:])]
        got = index_terms(m, z, t.access)[:1] + index_terms(m, z, t.stmt.accesses[0])
        cases.append(Case(f"fill{key}_{i}", domain(m, z), equal_all(got, want),
                          about=(f"`{t.stmt.label()}` does not fill the slot of its version with the declared cell of "
                                 f"{d.source}", (z,))))
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
    versions: dict[int, tuple[Ring, IExpr]] = {}  # id(use node) -> its ring and version
    for f, d in fresh:
        found = _ring_uses(m, f, d)
        if isinstance(found, Verdict):
            return found
        fills, uses = found
        cases += _ring_cases(m, f, d, fills, uses, names)
        drop |= {id(t.stmt.node) for t in fills} | {id(f.decl.node)}
        versions |= {id(u.stmt.node): (d, u.version) for u in uses}
    decided = _decided(cases, timeout_ms)
    if isinstance(decided, Verdict):
        return decided

    def statement(st: Any) -> Any:
        if id(st) not in versions:
            return st
        d, v = versions[id(st)]

        def load(ld: L.Ld) -> L.SExpr:
            return L.Ld(d.source, d.cell_of(v, ld.index[1:]), ld.dtype) if ld.buf == d.buffer else ld

        return dataclasses.replace(st, value=map_loads(st.value, load))

    return dataclasses.replace(m.program, body=_rewrite(m.program.body, statement, drop)), decided


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
