"""containment: bound levels nest as the target's containment order admits.

Formula, for every pair of loops ``l_j`` around ``l_k`` (``j < k``) both bound to hardware
scopes (grid, block, warp, lane, vector, core):

    contains(bind(l_j), bind(l_k))   or   (both bind the same scope and not the same slot)

Several levels may bind one scope (a 2-d thread region binds two loops to ``block``; the
slots ``block0`` / ``block1`` name its dimensions, and ``hardware_limits`` bounds their
product), but one slot cannot index two levels (``block0`` inside ``block0``), and a pair the
order does not relate (warp around block, core around lane) is refused. Decided on the loop
tree (no solver); the witness is the two loops.
"""
from __future__ import annotations

from ..model import Model
from ..target import HARDWARE_KINDS, Target
from ..verdict import Verdict, Witness, disproved, proved

FORMULA = ("for bound loops l_j around l_k: contains(bind(l_j), bind(l_k)) in the target's order, or one scope "
           "on distinct slots")


def check(m: Model, target: Target) -> Verdict:
    for h in m.headers:
        inner = h.node
        kind = inner.binding and inner.binding.rstrip("0123456789")
        if kind not in HARDWARE_KINDS:
            continue
        for lp in h.loops:
            if lp.binding not in HARDWARE_KINDS:
                continue
            outer = lp.node
            if outer.binding == inner.binding and inner.binding != kind:
                why = f"slot {inner.binding} is used by both (a hardware index can bind one level of a nest)"
            elif lp.binding == kind:
                continue
            elif not target.contains(lp.binding, kind):
                why = f"the target's containment order has no {lp.binding} > {kind}"
            else:
                continue
            return disproved(Witness(f"loop {inner.name!r} bound to {inner.binding} is nested in loop {outer.name!r} "
                                     f"bound to {outer.binding}: {why}"), "structure")
    return proved("structure")
