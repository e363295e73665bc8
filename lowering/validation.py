"""Translation validation of a lowering with isl (check_implemented_domains, extended to accesses).

For each scheduled statement ``S`` (an ``Assign`` / ``Accum``, numbered in program order)
with specified domain ``D_S`` (its loops' ranges and guards, over the scheduled loop
variables, with bound sizes fixed and free sizes as parameters >= 0), and its lowered
copies ``c`` with implemented domains ``D_c`` (the lowered loops' bounds and guards) and
instance maps ``tau_c`` (``Store.origin``):

``coverage``
    every ``tau_c`` is injective on ``D_c``; the images ``tau_c(D_c)`` are pairwise
    disjoint and their union is ``D_S`` (each specified instance runs exactly once); the
    copy stores to the same buffer with the same update operator; its value expression
    has the same operators, dtypes, literals and buffers; and every index expression of
    the copy (store, loads, index values, select conditions) ``g`` agrees with the
    specified one ``f`` on the implemented domain: ``g(x) = f(tau_c(x))`` for all
    ``x in D_c``.
``bounds``
    on the implemented domain (narrowed by the conditions of the ``Sel`` branches a load
    sits in), every index of a lowered access lies within the shape of the tensor or of
    the innermost allocation of that name (memory safety of the emitted code).

An obligation whose sets are not quasi-affine (products of loop variables, division by a
symbol) is ``unknown``; binding the sizes usually makes them affine. Disproved verdicts
carry a witness point: the sizes and the loop coordinates, by loop name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

import islpy as isl

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.affine import to_isl, var_name
from tilecert.semantics.index import CMP_OPS, IBin, IConst, IExpr, INot, IVar
from tilecert.semantics.solver_names import solver_name, user_name
from tilecert.semantics.sched.base import substitute

from .lower import bind_sizes_in
from .program import Alloc, For, Guard, Lowered, Node, Seq, Store
from .verdict import Validation, Verdict

OFFSET = 1_000_000  # lowered loop variable v is named like scheduled variable v + OFFSET in isl text


@dataclass
class Scope:
    """The loops (variable, lo, hi-exclusive), guards and buffer shapes around a statement."""

    loops: list[tuple[int, IExpr, IExpr, str]] = field(default_factory=list)
    facts: list[IExpr] = field(default_factory=list)
    shapes: dict[str, tuple[IExpr, ...]] = field(default_factory=dict)

    def child(self) -> "Scope":
        return Scope(list(self.loops), list(self.facts), dict(self.shapes))


# ----------------------------------------------------------------------------- statement walks
def spec_statements(p: ir.Program) -> list[tuple[object, Scope]]:
    """The scheduled program's ``Assign`` / ``Accum`` statements in program order, with their scopes."""
    out: list[tuple[object, Scope]] = []

    def walk(block: ir.Block, scope: Scope) -> None:
        for st in block.ops:
            if isinstance(st, L.Loop):
                inner = scope.child()
                inner.loops.append((st.var, st.start, IBin("add", st.start, st.extent), st.name))
                walk(st.body, inner)
            elif isinstance(st, L.If):
                inner = scope.child()
                inner.facts.append(st.cond)
                walk(st.body, inner)
            elif isinstance(st, L.Decl):
                scope.shapes[st.buf.name] = st.buf.shape
            elif isinstance(st, (L.Assign, L.Accum)):
                out.append((st, scope))

    walk(p.body, Scope(shapes={t.name: t.shape for t in p.tensors}))
    return out


def lowered_statements(lp: Lowered) -> list[tuple[Store, Scope]]:
    out: list[tuple[Store, Scope]] = []

    def walk(body: tuple[Node, ...], scope: Scope) -> None:
        for node in body:
            if isinstance(node, For):
                inner = scope.child()
                inner.loops.append((node.var, node.lo, node.hi, node.name))
                walk(node.body, inner)
            elif isinstance(node, Guard):
                inner = scope.child()
                inner.facts.append(node.cond)
                walk(node.body, inner)
            elif isinstance(node, Seq):
                walk(node.body, scope.child())
            elif isinstance(node, Alloc):
                scope.shapes[node.buf] = node.shape
            elif isinstance(node, Store):
                out.append((node, scope))

    walk(lp.body, Scope(shapes={t.name: t.shape for t in lp.tensors}))
    return out


# ----------------------------------------------------------------------------- expressions
def accesses(e: L.SExpr, conds: tuple[IExpr, ...] = ()) -> list[tuple[Optional[str], tuple[IExpr, ...],
                                                                       tuple[IExpr, ...], bool]]:
    """``(buffer or None for an index value, index, Sel-path conditions, exact path)`` of each index use."""
    if isinstance(e, L.Ld):
        return [(e.buf, e.index, conds, True)]
    if isinstance(e, L.Ix):
        return [(None, (e.expr,), conds, True)]
    if isinstance(e, (L.Un, L.Cvt)):
        return accesses(e.x, conds)
    if isinstance(e, L.Bin):
        return accesses(e.a, conds) + accesses(e.b, conds)
    if isinstance(e, L.Sel):
        out = accesses(e.cond, conds)
        if isinstance(e.cond, L.Ix):
            return out + accesses(e.a, conds + (e.cond.expr,)) + accesses(e.b, conds + (INot(e.cond.expr),))
        inexact = [(b, i, c, False) for b, i, c, _ in accesses(e.a, conds) + accesses(e.b, conds)]
        return out + inexact
    return []


def skeleton(e: L.SExpr) -> tuple:
    """``e`` without its index expressions: operators, dtypes, literals and buffers."""
    if isinstance(e, L.Ld):
        return ("Ld", e.buf, e.dtype, len(e.index))
    if isinstance(e, L.Lit):
        return ("Lit", repr(e.value), type(e.value).__name__, e.dtype)
    if isinstance(e, L.Ix):
        return ("Ix", e.dtype)
    if isinstance(e, L.Un):
        return ("Un", e.fn, e.dtype, skeleton(e.x))
    if isinstance(e, L.Cvt):
        return ("Cvt", e.dtype, skeleton(e.x))
    if isinstance(e, L.Bin):
        return ("Bin", e.fn, e.dtype, skeleton(e.a), skeleton(e.b))
    if isinstance(e, L.Sel):
        return ("Sel", e.dtype, skeleton(e.cond), skeleton(e.a), skeleton(e.b))
    return (type(e).__name__,)


def lowered_names(e: IExpr) -> IExpr:
    """``e`` with each loop variable ``v`` renamed ``v + OFFSET`` (the lowered namespace)."""
    if isinstance(e, IVar):
        return IVar(e.region + OFFSET, e.axis)
    if isinstance(e, IBin):
        return IBin(e.op, lowered_names(e.a), lowered_names(e.b))
    if isinstance(e, INot):
        return INot(lowered_names(e.a))
    return e


def compose(e: IExpr, origin: Iterable[tuple[int, IExpr]]) -> IExpr:
    """``f(tau(x))``: the scheduled index ``e`` with each scheduled variable replaced by its lowered image."""
    for var, image in origin:
        e = substitute(e, var, lowered_names(image))
    return e


def is_condition(e: IExpr) -> bool:
    return isinstance(e, INot) or (isinstance(e, IBin) and e.op in CMP_OPS)


# ----------------------------------------------------------------------------- isl
class NotAffine(Exception):
    """An expression has no isl form (the verdict is unknown)."""


class Space:
    """isl text for one program: its size parameters (>= 0, bound ones fixed), by solver name."""

    def __init__(self, size_names: Iterable[str], sizes: Mapping[str, int]) -> None:
        self.params = sorted(solver_name(n) for n in set(size_names) | set(sizes))
        self.sizes = dict(sizes)
        ctx = [f"{p} >= 0" for p in self.params] + [f"{solver_name(p)} = {v}" for p, v in self.sizes.items()]
        self.context = " and ".join(ctx) or "true"

    def bound(self, e: IExpr) -> IExpr:
        """``e`` with the bound sizes substituted (constants refolded: ``M * N`` becomes affine)."""
        return bind_sizes_in(e, self.sizes)

    def text(self, e: IExpr) -> str:
        t = to_isl(self.bound(e))
        if t is None:
            raise NotAffine(f"{e} is not quasi-affine")
        return t

    def cond(self, e: IExpr) -> str:
        """isl text of condition ``e``; a constant (as ``(2 < N)`` becomes at ``N = 3``) is a truth value."""
        b = self.bound(e)
        if isinstance(b, IConst):
            return "(0 = 0)" if b.value else "(1 = 0)"
        return self.text(b)

    def conds(self, loops: list[tuple[int, IExpr, IExpr, str]], facts: Iterable[IExpr], shift: bool,
              extra: Iterable[IExpr] = ()) -> str:
        """The domain's constraints; ``extra`` conditions are already in the target namespace."""
        parts = [self.context] + [self.cond(e) for e in extra]
        for var, lo, hi, _ in loops:
            v = var_name(var + (OFFSET if shift else 0), 0)
            lo_t, hi_t = (self.text(lowered_names(lo)), self.text(lowered_names(hi))) if shift else \
                (self.text(lo), self.text(hi))
            parts.append(f"{lo_t} <= {v} < {hi_t}")
        for f in facts:
            parts.append(self.cond(lowered_names(f) if shift else f))
        return " and ".join(f"({p})" for p in parts)

    def vars(self, loops: list[tuple[int, IExpr, IExpr, str]], shift: bool) -> str:
        return ", ".join(var_name(v + (OFFSET if shift else 0), 0) for v, _, _, _ in loops)

    def set(self, loops, facts, shift: bool, extra: Iterable[IExpr] = ()) -> isl.Set:
        return parse(isl.Set, f"[{', '.join(self.params)}] -> {{ [{self.vars(loops, shift)}] : "
                              f"{self.conds(loops, facts, shift, extra)} }}")

    def map(self, loops, facts, outs: Iterable[str]) -> isl.Map:
        """``{ lowered x -> (outs) : x in the lowered domain }`` (outs already in isl text over lowered names)."""
        outs = list(outs)
        names = [f"o{k}" for k in range(len(outs))]
        eqs = [f"{n} = {o}" for n, o in zip(names, outs)]
        cond = " and ".join([self.conds(loops, facts, True)] + eqs)
        text = (f"[{', '.join(self.params)}] -> {{ [{self.vars(loops, True)}] -> [{', '.join(names)}] : "
                f"{cond} }}")
        return parse(isl.Map, text)


def parse(cls, text: str):
    """``cls(text)`` (an isl set or map); text isl cannot read makes the verdict unknown."""
    try:
        return cls(text)
    except isl.Error as exc:
        raise NotAffine(f"isl cannot read {text[:200]}: {exc}") from None


def witness(s: isl.Set, names: list[str]) -> dict[str, int]:
    """A point of nonempty ``s``: its parameters (by the user's size names) and coordinates, by name."""
    pt = s.sample_point()
    out: dict[str, int] = {}
    for k in range(s.dim(isl.dim_type.param)):
        param = s.get_dim_name(isl.dim_type.param, k)
        out[user_name(param) or param] = int(pt.get_coordinate_val(isl.dim_type.param, k).to_python())
    for k, name in enumerate(names):
        out[name] = int(pt.get_coordinate_val(isl.dim_type.set, k).to_python())
    return out


# ----------------------------------------------------------------------------- the obligations
def _subject(sid: int, st) -> str:
    op = "op=" if isinstance(st, L.Accum) or getattr(st, "accum", None) else "="
    return f"S{sid} {st.buf}[...] {op} at {st.loc}"


def check_coverage(space: Space, sid: int, spec, sscope: Scope, copies: list[tuple[Store, Scope]]) -> Verdict:
    subject = _subject(sid, spec)
    names = [name for _, _, _, name in sscope.loops]
    spec_vars = [v for v, _, _, _ in sscope.loops]
    spec_accum = spec.op if isinstance(spec, L.Accum) else None
    spec_acc = [(spec.buf, spec.index)] + [(b, i) for b, i, _, _ in accesses(spec.value)]
    try:
        want = space.set(sscope.loops, sscope.facts, False)
        covered: Optional[isl.Set] = None
        for store, lscope in copies:
            if [v for v, _ in store.origin] != spec_vars:
                return Verdict("coverage", "disproved", subject, "a lowered copy maps to different loops")
            if store.buf != spec.buf or store.accum != spec_accum or skeleton(store.value) != skeleton(spec.value):
                return Verdict("coverage", "disproved", subject,
                               "a lowered copy computes a different value or updates a different buffer")
            tau = space.map(lscope.loops, lscope.facts, (space.text(lowered_names(e)) for _, e in store.origin))
            if not tau.is_injective():
                return Verdict("coverage", "disproved", subject, "a lowered copy runs a specified instance twice")
            image = tau.range()
            if covered is not None:
                both = covered.intersect(image)
                if not both.is_empty():
                    return Verdict("coverage", "disproved", subject, "two lowered copies run the same instance",
                                   witness(both, names))
                covered = covered.union(image).coalesce()
            else:
                covered = image
            low_acc = [(store.buf, store.index)] + [(b, i) for b, i, _, _ in accesses(store.value)]
            for (sb, sidx), (lb, lidx) in zip(spec_acc, low_acc):
                want_idx = tuple(space.bound(compose(e, store.origin)) for e in sidx)
                got_idx = tuple(space.bound(lowered_names(e)) for e in lidx)
                if sb != lb or len(want_idx) != len(got_idx):
                    return Verdict("coverage", "disproved", subject, f"access of {sb} became an access of {lb}")
                if want_idx == got_idx:
                    continue
                if len(got_idx) == 1 and (is_condition(got_idx[0]) or is_condition(want_idx[0])):
                    # a guard value (a constant once sizes are bound, on either side): compare where it holds
                    a = space.set(lscope.loops, lscope.facts, True, got_idx)
                    b = space.set(lscope.loops, lscope.facts, True, want_idx)
                    bad = a.subtract(b).union(b.subtract(a))
                else:
                    a = space.map(lscope.loops, lscope.facts, (space.text(e) for e in got_idx))
                    b = space.map(lscope.loops, lscope.facts, (space.text(e) for e in want_idx))
                    bad = a.subtract(b).domain()
                if not bad.is_empty():
                    lnames = [name for _, _, _, name in lscope.loops]
                    return Verdict("coverage", "disproved", subject, f"an index of {sb} differs from the schedule's",
                                   witness(bad, lnames))
        if covered is None:
            if want.is_empty():
                return Verdict("coverage", "proved", subject, "never executed")
            return Verdict("coverage", "disproved", subject, "the statement was dropped", witness(want, names))
        missing = want.subtract(covered)
        if not missing.is_empty():
            return Verdict("coverage", "disproved", subject, "specified instances are not implemented",
                           witness(missing, names))
        extra = covered.subtract(want)
        if not extra.is_empty():
            return Verdict("coverage", "disproved", subject, "implemented instances are not specified",
                           witness(extra, names))
    except NotAffine as exc:
        return Verdict("coverage", "unknown", subject, str(exc))
    return Verdict("coverage", "proved", subject)


def check_bounds(space: Space, store: Store, scope: Scope) -> Verdict:
    subject = _subject(store.sid, store)
    lnames = [name for _, _, _, name in scope.loops]
    try:
        for buf, index, conds, exact in [(store.buf, store.index, (), True)] + accesses(store.value):
            if buf is None:
                continue
            shape = scope.shapes.get(buf)
            if shape is None or len(shape) != len(index):
                return Verdict("bounds", "disproved", subject, f"{buf} has no allocation of rank {len(index)} in scope")
            if not index:
                continue
            outside = " or ".join(f"({space.text(lowered_names(i))} < 0 or {space.text(lowered_names(i))} >= "
                                  f"{space.text(lowered_names(n))})" for i, n in zip(index, shape))
            dom = space.set(scope.loops, list(scope.facts) + list(conds), True)
            bad = dom.intersect(parse(isl.Set, f"[{', '.join(space.params)}] -> "
                                               f"{{ [{space.vars(scope.loops, True)}] : {outside} }}"))
            if not bad.is_empty():
                if not exact:
                    return Verdict("bounds", "unknown", subject,
                                   f"an access of {buf} under a data-dependent select may be out of bounds")
                return Verdict("bounds", "disproved", subject, f"an access of {buf} is out of bounds",
                               witness(bad, lnames))
    except NotAffine as exc:
        return Verdict("bounds", "unknown", subject, str(exc))
    return Verdict("bounds", "proved", subject)


def validate(p: ir.Program, lp: Lowered, sizes: Optional[Mapping[str, int]] = None) -> Validation:
    """Prove that ``lp`` implements scheduled program ``p`` (sizes in ``sizes`` fixed, the others symbolic)."""
    space = Space(p.sizes, dict(sizes or {}))
    lowered = lowered_statements(lp)
    by_sid: dict[int, list[tuple[Store, Scope]]] = {}
    for store, scope in lowered:
        by_sid.setdefault(store.sid, []).append((store, scope))
    spec = spec_statements(p)
    verdicts = [check_coverage(space, sid, st, scope, by_sid.pop(sid, [])) for sid, (st, scope) in enumerate(spec)]
    for sid, copies in sorted(by_sid.items()):
        verdicts.append(Verdict("coverage", "disproved", _subject(sid, copies[0][0]),
                                "a lowered statement implements no scheduled statement"))
    verdicts += [check_bounds(space, store, scope) for store, scope in lowered]
    return Validation(tuple(verdicts))
