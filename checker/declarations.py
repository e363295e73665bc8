"""What the verification of every datamap declaration shares (``forwarding.py``, ``allocations.py``).

A declaration is verified as a list of ``Case`` objects (``solve.py``) whose ``about`` is
``(summary, instances)``: no point in any case proves it; the first point disproves it, with those
instances as the witness. A declaration the program contradicts as written is *refused*: disproved
with no instances. Reading through a declaration rewrites accesses by name, which is exact only
when the name is declared once (``alone``).
"""
from __future__ import annotations

from typing import Union

from .model import BufferRec, Model
from .obligations.common import instance_of, sizes_of
from .solve import Case, Outcome, search
from .verdict import Verdict, Witness, disproved, unknown


def decided(cases: list[Case], timeout_ms: int) -> Union[str, Verdict]:
    """The engine when no case has a counterexample; else the verdict: disproved with the instances of the
    first point (``Case.about`` is ``(summary, instances)``), or unknown with the reason."""
    out: Outcome = search(cases, timeout_ms)
    if out.status == "empty":
        return out.engine or "structure"
    if out.status == "unknown":
        return unknown(out.reason, out.engine)
    summary, insts = out.case.about
    return disproved(Witness(summary, sizes_of(out.point), tuple(instance_of(x, out.point, "new") for x in insts)),
                     out.engine)


def refused(summary: str) -> Verdict:
    """A declaration the program contradicts as written (a named statement of another form)."""
    return disproved(Witness(summary), "structure")


def alone(m: Model, *bufs: BufferRec) -> bool:
    """No two buffers of ``m`` share a name with one of ``bufs`` (so rewriting by name is exact)."""
    return all(sum(b.name == x.name for b in m.buffers) == 1 for x in bufs)
