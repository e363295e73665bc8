"""hardware_limits: every CUDA launch fits the target (grid and block dimensions, threads, shared memory).

The launches, their geometry and their shared memory are those the CUDA planner computes
(``semantics/launch.py``, applied to loop form; ``T`` is ``semantics.bindings.Target``).
For a program that binds a GPU scope, for every launch, wherever the host loops around it
run and for every value of the symbolic sizes with a non-empty grid:

- grid dimension ``g`` (0, 1, 2): ``grid_dims[g] <= T.max_grid[g]``;
- block dimension ``b``: ``block_dims[b] <= T.max_block[b]`` and threads per block
  ``prod block_dims <= T.max_threads_per_block``, where a slot's launch extent is the
  ``max`` over all loops of the launch bound to it (sibling loops of every phase) and warps
  count ``T.warp_size`` threads each;
- shared memory: the bytes of every allocation the planner places in ``__shared__``
  (``copies * cells * itemsize``) sum to at most ``T.max_shared_bytes``;
- the launch's other requirements (``LaunchShape.refusals`` with reason
  ``hardware_limits``): hardware-bound loops start at 0 or above, launch extents depend only
  on the sizes and host loops, lane loops are bounded by a constant <= ``T.warp_size``, a
  kernel's buffers have constant shapes and shared copies constant counts.

Symbolic sizes range over ``[0, T.max_size]`` here (they index with the target's integers).
Products of symbolic extents are not Presburger: those cases go to z3. A counterexample
is the sizes and the value that exceeds the limit.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from tilecert.semantics.bindings import Target
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import IExpr
from tilecert.semantics.launch import (LaunchRefusal, LaunchShape, block_dims, cells, copies, grid_dims,
                                       loop_form_launches, placement, shared_bytes, threads_per_block, walk)

from ..formula import Const, Formula, Var, arith, cmp, conj, term_of
from ..model import Model
from ..solve import Case, search
from ..verdict import Verdict, Witness, disproved
from .common import evaluate_at, sizes_of, verdict_of

FORMULA = ("every launch: grid / block dimensions and threads per block (max over sibling loops) <= the target's "
           "limits, shared bytes the planner places <= limit, for all sizes")


def _shared(k: LaunchShape, target: Target) -> tuple[int, list[str]]:
    """The shared bytes the planner places for launch ``k`` and the buffers (``LaunchRefusal`` where it cannot)."""
    for top in k.inner:
        for s in walk(top):
            if s.kind == "alloc":
                cells(s)
    placed = placement(k)
    total = sum(shared_bytes(copies(k, s, placed.shared[p]), cells(s), dtype_of(s.dtype).itemsize)
                for p, s in placed.sites.items())
    return total, [s.name for s in placed.sites.values()]


def check(m: Model, target: Target, timeout_ms: int) -> Verdict:
    launches = loop_form_launches(m.program, m.sizes, target)
    headers = {h.node.var: h for h in m.headers}
    cases = []
    for i, k in enumerate(launches):
        where = f"launch {i}" + (f" (loop {k.loops[0].name!r})" if k.loops else "")
        try:
            for no in k.refusals:
                if no.reason == "hardware_limits":
                    raise no
            total, names = _shared(k, target)
        except LaunchRefusal as no:
            return disproved(Witness(f"{where} cannot be made: {no.message}"), "structure")
        if total > target.max_shared_bytes:
            return disproved(Witness(f"{where} places {total} bytes of shared memory ({', '.join(names)}) > "
                                     f"{target.max_shared_bytes}", tuple(sorted(m.sizes.items()))), "structure")
        if not k.loops:
            continue
        env = m.env({v: Var(f"h{v}") for v in k.host_vars})
        host: list[Formula] = []
        for v in k.host_vars:
            lp = headers[v].node
            start = term_of(lp.start, env)
            host += [cmp("le", start, Var(f"h{v}")), cmp("lt", Var(f"h{v}"), arith("add", start, term_of(lp.extent, env)))]
        grid = grid_dims(k)
        host += [cmp("le", Const(1), term_of(g, env)) for g in grid]
        limits: list[tuple[str, IExpr, int]] = [(f"grid dimension {'xyz'[d]}", grid[d], target.max_grid[d])
                                                for d in range(3)]
        limits += [(f"block dimension {'xyz'[d]}", e, target.max_block[d]) for d, e in enumerate(block_dims(k, target))]
        limits.append(("threads per block", threads_per_block(k, target), target.max_threads_per_block))
        for n, (what, e, limit) in enumerate(limits):
            value = term_of(e, env)
            cases.append(Case(f"l{i}_{n}", conj(*host, cmp("lt", Const(limit), value)),
                              about=(value, f"{where}: {what} is {{}} > {limit}")))

    cases = [replace(c, pos=conj(c.pos, *(cmp("le", Var(n), Const(target.max_size)) for n in c.names
                                         if n.startswith("p_")))) for c in cases]

    def witness(case: Case, point: Mapping[str, int]) -> Witness:
        term, what = case.about
        return Witness(what.format(evaluate_at(term, point)), sizes_of(point))

    return verdict_of(search(cases, timeout_ms), witness)
