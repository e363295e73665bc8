"""containment: bound levels nest as the target's containment order admits.

Formula, for every pair of loops ``l_j`` around ``l_k`` (``j < k``) both bound to hardware
scopes (grid, block, warp, lane, vector, core):

    contains(bind(l_j), bind(l_k))   or   (both bind one slotted kind, grid or block, on
                                           different slots)

A loop bound to the very binding of a loop around it (one slot used twice, or two warp or
lane levels) is refused, as is any pair the order does not relate (warp around block,
core around lane). Decided on the loop tree (no solver); the witness is the two loops.
"""
from __future__ import annotations

from ..model import Model
from ..target import HARDWARE_KINDS, Target
from ..verdict import Verdict, Witness, disproved, proved

FORMULA = "for bound loops l_j around l_k: contains(bind(l_j), bind(l_k)) in the target's order (or distinct slots)"
SLOTTED = ("grid", "block")


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
            if outer.binding == inner.binding:
                why = f"{inner.binding} is used by both (a hardware index can bind one level of a nest)"
            elif lp.binding == kind and kind in SLOTTED:
                continue
            elif not target.contains(lp.binding, kind):
                why = f"the target's containment order has no {lp.binding} > {kind}"
            else:
                continue
            return disproved(Witness(f"loop {inner.name!r} bound to {inner.binding} is nested in loop {outer.name!r} "
                                     f"bound to {outer.binding}: {why}"), "structure")
    return proved("structure")
