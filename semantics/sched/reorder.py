"""reorder(loops) and swap(outer, inner): permute the loops of a perfectly nested band.

``reorder(loops)`` takes the loops of a band (each loop's body exactly the next loop; guards
between them are sunk onto the innermost body, ``Band.inner_body``) listed in the desired new
order, outermost first; ``swap(outer, inner)`` is the two-loop case, exchanging a loop and the
loop directly inside it. Loop headers travel unchanged (variable, extent, kind, binding):
``tau`` is the identity on coordinates; only their execution order changes. A loop whose extent
(or start) reads another band loop's variable cannot move outside that loop (its extent would be
out of scope).

Legality, for old order ``(l_0, ..., l_{k-1})`` and new order ``pi``:

- ``dependence``: every dependence carried by the band stays lexicographically positive in
  the order ``pi`` (reduce-loop updates may commute under their policy);
- ``prefix_cut``: each observed cut inside the band (an anchor, frontier, memory owner or
  convergence point) separates the same set of loops in both orders, so that
  ``pi_j . tau = tau_j . pi'_rho(j)``;
- ``containment``, when band loops are bound: the new nesting of bound loops is one the
  targets' containment order admits.
"""
from __future__ import annotations

from .. import ir
from . import args as A
from .registry import schedule_op
from ..index import free_vars
from .base import Band, ScheduleError, band, names_arg, nest, replace_loop, with_body
from ..transform import Kind, Obligation, Tau, Transformed


def permute(p: ir.Program, b: Band, order: tuple[str, ...], op: str) -> Transformed:
    """The band ``b`` nested in ``order`` (the same loop names, outermost first)."""
    position = {n: k for k, n in enumerate(order)}
    for lp in b.loops:
        reads = free_vars(lp.extent) | free_vars(lp.start)
        for other in b.loops:
            if (other.var, 0) in reads and position[other.name] > position[lp.name]:
                raise ScheduleError(f"{op}: the extent {lp.extent} of loop {lp.name!r} reads loop {other.name!r}, "
                                    f"so {lp.name!r} cannot move outside {other.name!r} (the extent would be out of "
                                    "scope)",
                                    hint=f"keep {other.name!r} outside {lp.name!r}")
    by_name = {lp.name: lp for lp in b.loops}
    new = nest([by_name[n] for n in order], b.inner_body())
    old = tuple(lp.name for lp in b.loops)
    arrow = f"({', '.join(old)}) -> ({', '.join(order)})"
    obligations = [
        Obligation(Kind.DEPENDENCE, op, f"every dependence carried by the band stays lexicographically positive under "
                   f"{arrow}; reduce-loop updates may commute under their policy", old),
        Obligation(Kind.PREFIX_CUT, op, f"each observed cut inside the band separates the same set of loops under {arrow} "
                   "(pi_j . tau = tau_j . pi'_rho(j))", old),
    ]
    bound = tuple(lp.name for lp in b.loops if lp.binding is not None)
    if bound:
        obligations.append(Obligation(Kind.CONTAINMENT, op, f"the bound loops {', '.join(bound)} nest as {arrow} admits "
                                      "in the targets' containment order", bound))
    return Transformed(with_body(p, replace_loop(p.body, b.loops[0], [new])), Tau(), tuple(obligations))


@schedule_op("reorder", [A.ListOf(A.LoopName(), min_len=2, distinct=True)])
def reorder(p: ir.Program, loops: list[str]) -> Transformed:
    """Nest the perfectly nested band ``loops`` in the order given, outermost first (see the module doc)."""
    order = tuple(loops)
    return permute(p, band(p, order, "reorder"), order, "reorder")


@schedule_op("swap", [A.LoopName(nesting=True), A.LoopName(inside="outer")])
def swap(p: ir.Program, outer: str, inner: str) -> Transformed:
    """Exchange loop ``outer`` and the loop ``inner`` directly inside it (see the module doc)."""
    b = band(p, names_arg([outer, inner], "loops", "swap"), "swap")
    if b.loops[0].name != outer:
        raise ScheduleError(f"swap: loop {outer!r} is inside {inner!r}, not around it",
                            hint=f"call swap(outer={inner!r}, inner={outer!r})")
    return permute(p, b, (inner, outer), "swap")
