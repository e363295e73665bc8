"""Translation validation of a lowering, on the checker's engine.

The lowered program is read back as loop form (``loop_form``) and described by the
checker's model (``checker.model.Model``), as the scheduled program is. Each lowered
``Alloc`` and ``Store`` names the scheduled statement it copies (``sid``) and its tau
(``origin``), which gives the correspondence between the two models directly: no search,
one piece of tau per copy. Then the checker's obligations are discharged, as for a
schedule op:

``coverage`` (``checker.obligations.coverage``)
    every lowered instance performs a scheduled instance (tau maps it into the scheduled
    domain and the two do the same operation: same cell, same reducer and policy, an
    agreeing value, ``checker.agreement``), no scheduled instance is performed twice, and
    every scheduled instance is performed: a dropped guard, an off-by-one bound, a wrong
    index or a duplicated store is disproved with the instance as witness;
``bounds`` (``checker.obligations.bounds``)
    every access of the lowered program lies inside its tensor or allocation (memory safety
    of the emitted code).

The order of the lowered instances is not checked: a lowering that reordered dependent
statements would pass (the lowering keeps every block's order and runs each loop upwards;
the checker's ``dependence`` fits the same correspondence, but costs time quadratic in the
copies of an unrolled loop: 10 s for 32 copies against 1.6 s for ``coverage``).

The verdicts are a checker ``Report`` (one ``Result`` per obligation, subject ``lowering of
<kernel>``), so ``Proof.of`` renders them for emitted headers exactly as a schedule's. The
sizes the lowering bound (``Lowered.bound``) are fixed, the sizes given fix more, every other
size ranges over all values ``>= 0``; an obligation that is not quasi-affine there goes to
z3 and may stay unknown, which binding the sizes usually settles. Disproved witnesses are
replayed on the loop interpreter (the lowered program against the scheduled one).
"""
from __future__ import annotations

from typing import Mapping, Optional

from tilecert.checker import replay
from tilecert.checker.check import discharge
from tilecert.checker.correspondence import Correspondence, Image, Piece
from tilecert.checker.gate import Proof
from tilecert.checker.model import Model
from tilecert.checker.obligations import bounds, coverage
from tilecert.checker.solve import DEFAULT_TIMEOUT_MS
from tilecert.checker.verdict import DISPROVED, Report
from tilecert.semantics import ir
from tilecert.semantics.errors import TilecertError

from .loop_form import LoopForm, loop_form
from .program import Lowered, LoweringError


class ValidationError(TilecertError):
    """Translation validation did not prove the lowering: nothing is emitted or run."""

    def __init__(self, report: Report, what: str) -> None:
        self.report = report
        super().__init__(f"{what}: translation validation failed\n" + "\n".join(Proof.of(report, what).lines()),
                         hint="a disproved verdict is a lowering bug (see report.explain() for the witness); an "
                              "unknown one needs bound sizes (tc.schedule(kernel, M=..., ...)) to make the index "
                              "arithmetic affine")


def validate(p: ir.Program, lp: Lowered, sizes: Optional[Mapping[str, int]] = None,
             timeout_ms: int = DEFAULT_TIMEOUT_MS) -> Report:
    """The checker's report on ``lp`` implementing scheduled program ``p``: ``coverage`` and ``bounds``,
    with the lowering's bound sizes and ``sizes`` fixed and every other size symbolic."""
    given = dict(sizes or {})
    clash = {n: v for n, v in lp.bound if given.get(n, v) != v}
    if clash:
        raise LoweringError(f"validation sizes {given} contradict the sizes the lowering bound {dict(lp.bound)}",
                            p.loc, "validate at the bound sizes, or lower again")
    fixed = {**given, **dict(lp.bound)}
    spec, form = Model(p, fixed), loop_form(lp)
    impl = Model(form.program, fixed)
    subject = f"lowering of {p.name}"
    c = correspondence(spec, impl, form)
    results = [
        discharge("coverage", subject, coverage.FORMULA, (), lambda: coverage.check(c, timeout_ms),
                  lambda at: replay.replay_transform(p, form.program, at), fixed),
        discharge("bounds", subject, bounds.FORMULA, (), lambda: bounds.check(impl, timeout_ms),
                  lambda at: replay.replay_program(form.program, at), fixed),
    ]
    return Report(results, fixed, tuple(n for n in p.sizes if n not in fixed))


def correspondence(spec: Model, impl: Model, form: LoopForm) -> Correspondence:
    """Each allocation and store of ``impl`` as an image of the scheduled statement it names, under its
    own tau; one that names none (or a statement of another kind or other loops) is unmatched."""
    c = Correspondence(spec, impl)
    for s in impl.effectful:
        node = form.lowered(s.node)
        old = spec.statements[node.sid] if 0 <= node.sid < len(spec.statements) else None
        if old is None or old.kind != s.kind or [v for v, _ in node.origin] != list(old.vars):
            c.unmatched.append(s)
            continue
        c.images[s.id] = Image(s, old, (Piece(node.origin),))
        if s.kind == "decl":
            c.buffers[id(s.target)] = old.target
    return c


def refuses(report: Report) -> bool:
    """Whether a lowering must not be emitted: its coverage is disproved (a lowering bug at every size)."""
    return report.status("coverage") == DISPROVED
