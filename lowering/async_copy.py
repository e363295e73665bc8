"""Asynchronous copies into shared rings (``loopir.AsyncCopy`` / ``loopir.AsyncWait``): how many groups a wait
may leave in flight.

A realized pipeline loop runs one tick per iteration of its tick loop; its body is a fixed sequence of positions.
Every ``AsyncWait`` of the body runs at every tick, on every thread (it is a block barrier), and commits the
copies its thread issued since the previous one as one group (an empty one when there were none), so the groups
are the same on every thread and at every tick. A wait at position ``w`` of tick ``t`` that must complete the copy
issued at position ``q`` of tick ``t - D`` counts the waits in the time interval ``((t - D, q), (t, w)]``: the
first of them committed the copy's group, so the groups newer than it are that count less one::

    pending = sum over wait positions w' of (D + 1 - [w' > w] - [w' < q])  -  1

(a wait ``w'`` runs at the ticks ``t - D + [w' < q] .. t - [w' > w]``). ``cp.async.wait_group(pending)`` then
lands the copy and leaves the ``pending`` newer groups in flight; a smaller count is safe (it waits for more), a
larger one lets the consumer read the slot's old content. ``D`` is the distance in ticks between the producer's
and the consumer's kernel columns (``derive.Derived.column``); a copy that issues after its wait in the same tick
(``D = 0``, ``q > w``) is no plan's.

The count is the realization's, derived from a plan whose obligations (``pipeline_schedule``, ``versions``,
``release``) say that no cell of a slot is accessed between its copy's issue and this wait; the checker reads
``AsyncCopy`` as the copy landed at its issue and ``AsyncWait`` as the barrier. The host emulation
(``backends/cuda/tc_cuda_emu.h``) lands each copy only at its wait, so a wrong count shows as a wrong value there.
"""
from __future__ import annotations

from typing import Sequence


def wait_pending(waits: Sequence[int], issue: int, wait: int, distance: int) -> int:
    """The ``pending`` of the ``AsyncWait`` at body position ``wait`` that completes the copy issued at position
    ``issue``, ``distance`` ticks earlier, where the body's waits sit at positions ``waits`` (see the module
    docstring). ``ValueError`` when the copy issues after the wait in the same tick, or ``wait`` is no wait."""
    if wait not in waits or issue in waits:
        raise ValueError(f"position {wait} must be one of the waits {tuple(waits)} and {issue} none of them")
    if distance < 0 or (distance == 0 and issue > wait):
        raise ValueError(f"the copy at position {issue}, {distance} ticks before the wait at {wait}, issues after it")
    return sum(distance + 1 - (w > wait) - (w < issue) for w in waits) - 1
