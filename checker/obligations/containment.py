"""containment: bound levels nest as the target's containment order admits, and the launches exist.

Formula, for every pair of loops ``l_j`` around ``l_k`` (``j < k``) both bound to scopes
(grid, block, warp, lane, vector, core; ``semantics/bindings.py``):

    contains(scope(l_j), scope(l_k))   or   scope(l_j) = scope(l_k) and slot(l_j) != slot(l_k)
                                        or   scope(l_j) = scope(l_k) in {core, vector}

so one hardware slot indexes at most one level along any path, whatever loops lie between
(no ``lane`` in ``lane``, ``warp`` in ``warp``, ``block0`` in ``block0``); several levels may
bind one slotted scope on distinct slots (a 2-d thread region binds ``block1`` / ``block0``),
and nested ``core`` loops (collapsed) or ``vector`` loops are admitted. A pair the order
does not relate (warp around block, core around lane) is refused. For a program that binds a
GPU scope, every launch must also exist as ``semantics/launch.py`` defines them (the CUDA
planner's rules): grid loops form the launch's grid nest (no grid loop among a kernel's
statements, no grid slot twice), no thread dimension twice along a path, no ``block0``
beside warp / lane in one launch. Decided on the loop tree (no solver); the witness names
the loops.
"""
from __future__ import annotations

from tilecert.semantics.bindings import SCOPES, Target, hardware_slot, scope_of
from tilecert.semantics.launch import loop_form_launches

from ..model import Model
from ..verdict import Verdict, Witness, disproved, proved

FORMULA = ("for bound loops l_j around l_k: contains(bind(l_j), bind(l_k)) in the target's order, or one scope on "
           "distinct slots (core / vector may nest); every launch exists (grid nest, no thread slot twice, no block0 "
           "beside warp / lane)")


def check(m: Model, target: Target) -> Verdict:
    for h in m.headers:
        inner = h.node
        scope = scope_of(inner.binding)
        if scope not in SCOPES:
            continue
        for lp in h.loops:
            if lp.binding not in SCOPES:
                continue
            outer = lp.node
            if lp.binding == scope:
                slot = hardware_slot(inner.binding)
                if slot is None or slot != hardware_slot(outer.binding):
                    continue
                why = f"slot {slot} is used by both (a hardware index can bind one level of a nest)"
            elif target.contains(lp.binding, scope):
                continue
            else:
                why = f"the target's containment order has no {lp.binding} > {scope}"
            return disproved(Witness(f"loop {inner.name!r} bound to {inner.binding} is nested in loop {outer.name!r} "
                                     f"bound to {outer.binding}: {why}"), "structure")
    for k in loop_form_launches(m.program, m.sizes, target):
        for no in k.refusals:
            if no.reason == "containment":
                return disproved(Witness(f"the CUDA launch cannot be made: {no.message}"), "structure")
    return proved("structure")
