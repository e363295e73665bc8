"""The polyhedral model of a loop-form program: statements, instances, accesses, buffers.

A *statement* is a leaf of the loop tree (``Decl``, ``Assign``, ``Accum``, ``Barrier``). Its
*instances* are the values of its enclosing loop variables where every loop bound and
every enclosing guard holds (the iteration domain ``D_s``). Its *accesses*:

- a ``Decl`` writes every cell of the fresh buffer instance it allocates (the interpreter
  zero-fills it; one allocation per instance of its enclosing loops, its *owner* prefix);
- an ``Assign`` writes its target cell and reads the loads of its value;
- an ``Accum`` *updates* its target cell (a read-modify-write with its reducer and policy)
  and reads the loads of its value;
- a load under a ``Sel`` whose condition is an index condition happens only where the
  branch is taken (the condition guards it); under a data-dependent condition it is a
  *may* access.

A cell of a declared buffer is (the buffer's ``Decl``, the owner coordinates, the element
index); a cell of a tensor is (its name, the element index). Buffers are resolved
lexically: an access names the nearest ``Decl`` in scope, so copies of a body that
declare buffers of one name hold distinct buffers; a ``Decl`` of a name already visible
where it stands (a tensor's, or an enclosing or earlier declaration's) is recorded in
``shadows`` (a rewrite by name would mix the two).

Instances are written as formulas (``formula.py``): ``Inst`` names the variables of one
copy of a statement's coordinates, and ``domain``, ``index_terms``, ``access_guard``,
``same_cell`` build the formulas. ``order.py`` builds the execution order, ``polyhedral.py``
the same objects as isl sets and maps. What reads a loop variable no enclosing loop binds,
or a buffer no ``Decl`` in scope declares, a loop nested in a loop of its own variable (an
instance gives each variable one coordinate), and a broken pipeline stage structure
(``semantics.pipeline.stages.check_stage_structure``) are recorded in ``problems`` (the program is
ill-formed there).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import INDEPENDENT_SCOPES, THREAD_SCOPES
from tilecert.semantics.index import IExpr, free_vars
from tilecert.semantics.pipeline.stages import check_stage_structure
from tilecert.semantics.printer import sexpr

from .errors import CheckerError
from .formula import Const, Env, Formula, Term, Var, arith, cmp, cond_of, conj, disj, equal_all, negate, term_of



@dataclass(frozen=True, eq=False)
class LoopRec:
    """One loop around a statement; compared by identity of the loop node."""

    node: L.Loop

    @property
    def var(self) -> int:
        return self.node.var

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def binding(self) -> Optional[str]:
        return L.binding_kind(self.node.binding)

    @property
    def order(self) -> str:
        """How distinct iterations are ordered: ``ordered`` (lexicographically, serial / reduce /
        pipeline, unbound or bound to serial / unrolled), ``threads`` (concurrent participants of a
        block / warp / lane scope, ordered only by barriers) or ``independent`` (no order: a parallel
        loop, or bound to grid / core / vector)."""
        if self.binding in THREAD_SCOPES:
            return "threads"
        if self.binding in INDEPENDENT_SCOPES or self.node.kind == "parallel":
            return "independent"
        return "ordered"


@dataclass(eq=False)
class BufferRec:
    name: str
    dtype: str
    shape: tuple[IExpr, ...]
    scope: str  # "global" for a tensor, else the Decl's scope (local / shared / global)
    decl: Optional["Stmt"] = None

    @property
    def owner_loops(self) -> tuple[LoopRec, ...]:
        """The loops whose coordinates identify one allocation (none for a tensor)."""
        return self.decl.loops if self.decl is not None else ()

    def __repr__(self) -> str:
        return f"BufferRec({self.name})"


@dataclass(frozen=True, eq=False)
class Access:
    mode: str  # read | write | update
    buffer: BufferRec
    index: Optional[tuple[IExpr, ...]]  # None: every cell of the buffer (an allocation)
    guards: tuple[tuple[IExpr, bool], ...] = ()  # select conditions that hold (True) or fail (False)
    may: bool = False  # under a data-dependent select
    op: Optional[str] = None  # the reducer of an update
    policy: Optional[str] = None

    @property
    def writes(self) -> bool:
        return self.mode != "read"


@dataclass(eq=False)
class Stmt:
    id: int
    node: Any
    kind: str  # decl | assign | accum | barrier (or loop, for the header of a loop)
    loops: tuple[LoopRec, ...]
    guards: tuple[IExpr, ...]
    path: tuple[int, ...]
    containers: tuple[str, ...] = ()  # for each path position but the last: "loop" or "if", what it enters
    accesses: tuple[Access, ...] = ()
    target: Optional[BufferRec] = None

    @property
    def vars(self) -> tuple[int, ...]:
        return tuple(lp.var for lp in self.loops)

    @property
    def effectful(self) -> bool:
        return self.kind != "barrier"

    def label(self) -> str:
        """The statement as a line of text, loop variables shown by their loop names."""
        n = self.node
        if isinstance(n, L.Decl):
            text = f"{n.buf.scope} {n.buf.name}[{', '.join(map(str, n.buf.shape))}]"
        elif isinstance(n, L.Assign):
            text = f"{n.buf}[{', '.join(map(str, n.index))}] = {sexpr(n.value)}"
        elif isinstance(n, L.Accum):
            text = f"{n.buf}[{', '.join(map(str, n.index))}] {n.op}= {sexpr(n.value)} ({n.policy})"
        elif isinstance(n, L.Barrier):
            text = f"barrier({n.scope})"
        else:
            text = f"loop {n.name}"
        names = {lp.var: lp.name for lp in self.loops}
        return re.sub(r"r(\d+)\.0", lambda m: names.get(int(m.group(1)), m.group(0)), text)

    def __repr__(self) -> str:
        return f"Stmt({self.id}: {self.label()})"


def common_depth(s: Stmt, t: Stmt) -> int:
    """How many outermost loops statements ``s`` and ``t`` share."""
    k = 0
    while k < min(len(s.loops), len(t.loops)) and s.loops[k].node is t.loops[k].node:
        k += 1
    return k


def textually_before(s: Stmt, t: Stmt) -> bool:
    return s.path < t.path


def order_shape(s: Stmt, t: Stmt) -> Optional[tuple]:
    """What the order between instances of ``s`` and ``t`` depends on: their shared loops (variables, order
    classes, kinds) and their textual order; None when a shared loop runs threads (barriers matter too)."""
    loops = s.loops[:common_depth(s, t)]
    if any(lp.order == "threads" for lp in loops):
        return None
    return tuple((lp.var, lp.order, lp.node.kind) for lp in loops), textually_before(s, t)


class Model:
    """The statements, buffers and problems of a loop-form program, with bound ``sizes``."""

    def __init__(self, program: ir.Program, sizes: Optional[Mapping[str, int]] = None) -> None:
        if not L.is_loop_form(program.body):
            raise CheckerError(f"program {program.name} is not in loop form",
                               hint="expand it first (tc.expand), or check the kernel, which expands it")
        self.program = program
        self.sizes = {k: int(v) for k, v in (sizes or {}).items()}
        self.statements: list[Stmt] = []
        self.headers: list[Stmt] = []  # one pseudo-statement per loop: its instances are the loop's executions
        self.buffers: list[BufferRec] = []
        self.problems: list[str] = []
        self.shadows: list[str] = []  # declarations of a name already visible where they stand
        scope = {}
        for t in program.tensors:
            rec = BufferRec(t.name, t.dtype, t.shape, "global")
            self.buffers.append(rec)
            scope[t.name] = rec
        self._block(program.body, (), (), (), (), scope)
        self.problems += check_stage_structure(program)  # a broken pipeline stage structure is never proved

    # ------------------------------------------------------------------ views
    @property
    def barriers(self) -> list[Stmt]:
        return [s for s in self.statements if s.kind == "barrier"]

    @property
    def effectful(self) -> list[Stmt]:
        return [s for s in self.statements if s.effectful]

    def env(self, at: Mapping[int, Term]) -> Env:
        return Env(at, self.sizes)

    # ------------------------------------------------------------------ construction
    def _block(self, block: ir.Block, loops: tuple[LoopRec, ...], guards: tuple[IExpr, ...], path: tuple[int, ...],
               containers: tuple[str, ...], scope: dict[str, BufferRec]) -> None:
        scope = dict(scope)
        bound = {lp.var for lp in loops}
        for pos, st in enumerate(block.ops):
            here = path + (pos,)
            if isinstance(st, L.Loop):
                self._scope_check(f"the range of loop {st.name!r}", [st.start, st.extent], bound)
                if st.var in bound:
                    self.problems.append(f"loop {st.name!r} rebinds loop variable r{st.var} of an enclosing loop")
                self.headers.append(Stmt(len(self.headers), st, "loop", loops, guards, here, containers))
                self._block(st.body, loops + (LoopRec(st),), guards, here, containers + ("loop",), scope)
            elif isinstance(st, L.If):
                self._scope_check(f"the guard `if {st.cond}`", [st.cond], bound)
                self._block(st.body, loops, guards + (st.cond,), here, containers + ("if",), scope)
            else:
                self._leaf(st, loops, guards, here, containers, scope, bound)

    def _leaf(self, st: Any, loops, guards, path, containers, scope: dict[str, BufferRec], bound: set[int]) -> None:
        sid = len(self.statements)
        if isinstance(st, L.Decl):
            self._scope_check(f"the shape of {st.buf.name}", list(st.buf.shape), bound)
            stmt = Stmt(sid, st, "decl", loops, guards, path, containers)
            if st.buf.name in scope:
                what = "a tensor" if scope[st.buf.name].decl is None else "a declaration in scope"
                self.shadows.append(f"`{stmt.label()}` declares {st.buf.name}, which {what} already names")
            rec = BufferRec(st.buf.name, st.buf.dtype, st.buf.shape, st.buf.scope, stmt)
            self.buffers.append(rec)
            scope[st.buf.name] = rec
            stmt.target = rec
            stmt.accesses = (Access("write", rec, None),)
        elif isinstance(st, (L.Assign, L.Accum)):
            stmt = Stmt(sid, st, "assign" if isinstance(st, L.Assign) else "accum", loops, guards, path, containers)
            reads = list(self._loads(st.value, (), False, scope, stmt, bound))
            target = self._resolve(st.buf, scope, stmt)
            self._scope_check(f"the index of {st.buf}", list(st.index), bound)
            stmt.target = target
            if target is not None:
                if isinstance(st, L.Assign):
                    reads.append(Access("write", target, st.index))
                else:
                    reads.append(Access("update", target, st.index, op=st.op, policy=st.policy))
            stmt.accesses = tuple(reads)
        elif isinstance(st, L.Barrier):
            stmt = Stmt(sid, st, "barrier", loops, guards, path, containers)
        else:
            raise CheckerError(f"unexpected loop-form statement {type(st).__name__}", hint="report this")
        self.statements.append(stmt)

    def _loads(self, e: L.SExpr, guards: tuple, may: bool, scope, stmt: Stmt, bound: set[int]) -> Iterator[Access]:
        if isinstance(e, L.Ld):
            self._scope_check(f"the index of a load of {e.buf}", list(e.index), bound)
            rec = self._resolve(e.buf, scope, stmt)
            if rec is not None:
                yield Access("read", rec, e.index, guards, may)
        elif isinstance(e, L.Ix):
            self._scope_check(f"the index value {e.expr}", [e.expr], bound)
        elif isinstance(e, (L.Un, L.Cvt)):
            yield from self._loads(e.x, guards, may, scope, stmt, bound)
        elif isinstance(e, L.Bin):
            yield from self._loads(e.a, guards, may, scope, stmt, bound)
            yield from self._loads(e.b, guards, may, scope, stmt, bound)
        elif isinstance(e, L.Sel):
            yield from self._loads(e.cond, guards, may, scope, stmt, bound)
            if isinstance(e.cond, L.Ix):
                yield from self._loads(e.a, guards + ((e.cond.expr, True),), may, scope, stmt, bound)
                yield from self._loads(e.b, guards + ((e.cond.expr, False),), may, scope, stmt, bound)
            else:
                yield from self._loads(e.a, guards, True, scope, stmt, bound)
                yield from self._loads(e.b, guards, True, scope, stmt, bound)

    def _resolve(self, name: str, scope: dict[str, BufferRec], stmt: Stmt) -> Optional[BufferRec]:
        if name not in scope:
            self.problems.append(f"statement `{stmt.label()}` accesses {name}, which no tensor or Decl in scope names")
            return None
        return scope[name]

    def _scope_check(self, what: str, exprs: list[IExpr], bound: set[int]) -> None:
        for e in exprs:
            for region, _ in sorted(free_vars(e) - {(v, 0) for v in bound}):
                self.problems.append(f"{what} reads loop variable r{region}, which no enclosing loop binds")


# ----------------------------------------------------------------------------- instances as formulas
@dataclass(frozen=True)
class Inst:
    """One copy of a statement's coordinates in a query: loop variable ``v`` is the term ``at[v]``
    (a variable of the query, or an expression over another copy's variables)."""

    stmt: Stmt
    at: Mapping[int, Term]

    def coord(self, k: int) -> Term:
        """The term of the statement's ``k``-th loop (outermost is 0)."""
        return self.at[self.stmt.loops[k].var]

    def coords(self) -> list[Term]:
        return [self.coord(k) for k in range(len(self.stmt.loops))]

    def owned(self, start: int = 0) -> list[str]:
        """The names of the variables standing for loops ``start``, ``start + 1``, ... of the statement."""
        return [t.name for t in self.coords()[start:] if isinstance(t, Var)]


def inst(stmt: Stmt, prefix: str, share: Optional[tuple["Inst", int]] = None) -> Inst:
    """A copy of ``stmt``'s coordinates as variables ``<prefix><var>``; ``share=(other, k)`` reuses
    ``other``'s terms for the first ``k`` loops (which must be ``stmt``'s first ``k`` loops too)."""
    at: dict[int, Term] = {v: Var(f"{prefix}{v}") for v in stmt.vars}
    if share is not None:
        other, k = share
        for lp in stmt.loops[:k]:
            at[lp.var] = other.at[lp.var]
    return Inst(stmt, at)


def domain(m: Model, x: Inst) -> Formula:
    """``D_s``: every loop bound and enclosing guard of the statement holds."""
    env = m.env(x.at)
    parts = []
    for k, lp in enumerate(x.stmt.loops):
        v, start = x.coord(k), term_of(lp.node.start, env)
        parts += [cmp("le", start, v), cmp("lt", v, arith("add", start, term_of(lp.node.extent, env)))]
    parts += [cond_of(g, env) for g in x.stmt.guards]
    return conj(*parts)


def index_terms(m: Model, x: Inst, acc: Access) -> list[Term]:
    env = m.env(x.at)
    return [term_of(e, env) for e in acc.index or ()]


def access_guard(m: Model, x: Inst, acc: Access) -> Formula:
    """Where the access happens inside its statement's domain (the select branches taken)."""
    env = m.env(x.at)
    return conj(*(cond_of(c, env) if taken else negate(cond_of(c, env)) for c, taken in acc.guards))


def in_bounds(m: Model, x: Inst, index: list[Term], buf: BufferRec) -> Formula:
    """Every component of ``index`` lies in ``[0, shape)`` of ``buf`` (shape evaluated at ``x``)."""
    env = m.env(x.at)
    return conj(*(conj(cmp("le", Const(0), i), cmp("lt", i, term_of(n, env))) for i, n in zip(index, buf.shape)))


def out_of_bounds(m: Model, x: Inst, acc: Access) -> Formula:
    idx, env = index_terms(m, x, acc), m.env(x.at)
    return disj(*(disj(cmp("lt", i, Const(0)), cmp("le", term_of(n, env), i)) for i, n in zip(idx, acc.buffer.shape)))


def same_cell(m: Model, x: Inst, a: Access, y: Inst, b: Access) -> Formula:
    """Accesses ``a`` of ``x`` and ``b`` of ``y`` (to one buffer) touch one cell: the same
    allocation (equal owner coordinates) and the same element (an allocation covers all)."""
    owner = [lp.var for lp in a.buffer.owner_loops]
    parts = [cmp("eq", x.at[v], y.at[v]) for v in owner]
    if a.index is not None and b.index is not None:
        parts.append(equal_all(index_terms(m, x, a), index_terms(m, y, b)))
    elif a.index is not None:
        parts.append(in_bounds(m, x, index_terms(m, x, a), a.buffer))
    elif b.index is not None:
        parts.append(in_bounds(m, y, index_terms(m, y, b), b.buffer))
    return conj(*parts)


def shape_size(m: Model, x: Inst, buf: BufferRec) -> Term:
    """The number of elements of ``buf`` (its shape evaluated at ``x``)."""
    env, out = m.env(x.at), Const(1)
    for n in buf.shape:
        out = arith("mul", out, term_of(n, env))
    return out

