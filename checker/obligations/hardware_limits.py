"""hardware_limits: the launch fits the target (threads, block and grid dimensions, shared memory).

Formulas (``T`` is the target model, ``target.py``; each extent is evaluated wherever its
loop runs, for every value of the symbolic sizes):

- grid slot ``g`` (0, 1, 2): ``extent(l) <= T.max_grid[g]`` for each loop bound to it;
- block slot ``b``: ``extent(l) <= T.max_block[b]``; lane loops: ``extent(l) <= T.warp_size``;
- threads per block: along every path, ``prod extent(l) <= T.max_threads_per_block`` over
  the loops bound to block and warp, times ``T.warp_size`` when warps or lanes are bound (a
  warp runs ``T.warp_size`` threads whatever its lane loops cover);
- shared memory: at every statement, the bytes of the shared buffers allocated around it
  (``itemsize * prod shape``) sum to at most ``T.max_shared_bytes``.

Symbolic sizes range over ``[0, T.max_size]`` here (they index with the target's integers).
Products of symbolic extents are not Presburger: those cases go to z3. A counterexample
is the sizes, the place and the value that exceeds the limit.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from tilecert.semantics.dtypes import dtype_of

from ..formula import Const, Term, Var, arith, cmp, conj, term_of
from ..model import Model, Stmt, domain, inst, shape_size
from ..solve import Case, search
from ..target import Target
from ..verdict import Verdict, Witness
from .common import evaluate_at, instance_of, sizes_of, verdict_of

FORMULA = ("grid / block slot extents <= the target's limits, lanes <= warp size, threads per block <= limit, "
           "live shared bytes <= limit, for all sizes")
THREADS = ("block", "warp", "lane")


def _slot(binding: str) -> int:
    digits = binding[len(binding.rstrip("0123456789")):]
    return int(digits) if digits else 0


def _live_shared(m: Model, s: Stmt) -> list:
    """The shared buffers whose allocation encloses statement ``s`` (declared before it in a block around it)."""
    out = []
    for b in m.buffers:
        d = b.decl
        if d is None or b.scope != "shared":
            continue
        k = len(d.path) - 1
        if s.path[:k] == d.path[:k] and len(s.path) > k and s.path[k] >= d.path[k]:
            out.append(b)
    return out


def _threads(levels: list[tuple[str, Term]], target: Target) -> Term:
    """Threads per block along a path of thread levels: the block extents times, when warps or lanes are
    bound, ``warps * warp_size`` (the lanes of a warp are its ``warp_size`` threads)."""
    out: Term = Const(1)
    for kind, extent in levels:
        if kind != "lane":
            out = arith("mul", out, extent)
    if any(kind in ("warp", "lane") for kind, _ in levels):
        out = arith("mul", out, Const(target.warp_size))
    return out


def check(m: Model, target: Target, timeout_ms: int) -> Verdict:
    cases = []
    for h in m.headers:
        kind = h.node.binding and h.node.binding.rstrip("0123456789")
        if kind not in ("grid",) + THREADS:
            continue
        x = inst(h, "a")
        env = m.env(x.at)
        extent = term_of(h.node.extent, env)
        if kind != "warp":
            limit = {"grid": lambda: target.max_grid[_slot(h.node.binding)],
                     "block": lambda: target.max_block[_slot(h.node.binding)],
                     "lane": lambda: target.warp_size}[kind]()
            what = f"loop {h.node.name!r} bound to {h.node.binding} has extent {{}} > {limit}"
            cases.append(Case(f"e{h.id}", conj(domain(m, x), cmp("lt", Const(limit), extent)), about=(x, extent, what)))
        if kind != "grid":
            levels = [(lp.binding, term_of(lp.node.extent, env)) for lp in h.loops if lp.binding in THREADS]
            threads = _threads(levels + [(kind, extent)], target)
            what = f"{{}} threads per block at loop {h.node.name!r} > {target.max_threads_per_block}"
            cases.append(Case(f"t{h.id}", conj(domain(m, x), cmp("lt", Const(target.max_threads_per_block), threads)),
                              about=(x, threads, what)))
    for s in m.statements:
        shared = _live_shared(m, s)
        if not shared:
            continue
        x = inst(s, "a")
        total: Term = Const(0)
        for b in shared:
            total = arith("add", total, arith("mul", Const(dtype_of(b.dtype).itemsize), shape_size(m, x, b)))
        names = ", ".join(b.name for b in shared)
        what = f"{{}} bytes of shared memory ({names}) are live at `{s.label()}` > {target.max_shared_bytes}"
        cases.append(Case(f"m{s.id}", conj(domain(m, x), cmp("lt", Const(target.max_shared_bytes), total)),
                          about=(x, total, what)))

    cases = [replace(c, pos=conj(c.pos, *(cmp("le", Var(n), Const(target.max_size)) for n in c.names
                                         if n.startswith("p_")))) for c in cases]

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        x, term, what = case.about
        inst_ = (instance_of(x, point),) if x.stmt.loops else ()
        return Witness(what.format(evaluate_at(term, point)), sizes_of(point), inst_)

    return verdict_of(search(cases, timeout_ms), witness)
