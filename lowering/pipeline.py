"""The lowering pipeline: scheduled loop form -> a validated lowered program, pass by pass.

``lower_for(target, program, sizes)`` runs, in order:

1. **bind sizes** (``lower.bind_sizes``): the sizes the schedule binds become constants;
   **realize the modulo plans** (``modulo.realize_plans``; CUDA: one tick loop with ``cp.async``,
   ``async_copy.realize_async_copies``): each pipeline loop with a plan the
   checker proved becomes its prologue, steady state and epilogue over rings (a plan not proved is a
   ``LoweringError``; a loop with no plan stays sequential);
2. **place barriers** (``barriers.place_barriers``, CUDA only): each kernel as the threads of a
   block run it, with its representative threads and barriers explicit in loop form;
3. **check the placed barriers** (CUDA, where the program binds a GPU scope): the checker's
   program obligations of that program (``noninterference`` per barrier phase,
   ``barrier_uniform``, ``bounds``, ...);
4. **lower** (``lower.lower``): loop form -> ``Lowered`` (block / warp / lane participants as
   threads for CUDA, one after the other for C);
5. **validate** (``validation.validate(program, lowered, sizes)``, with the program of step 2):
   translation validation of step 4 on the checker's engine (a ``Report``); a disproved coverage
   verdict is a ``ValidationError``.

The reports of steps 3 and 5 are cached (``checker.gate.cached``), keyed by the full text of the
program they judge (with its bound sizes and placed barriers: the names and locations too, which
their results and witnesses cite), the sizes, and the hardware model (step 3) or the lowered
program (step 5).

The backends then render the result (CUDA: ``backends/cuda/plan.py`` splits it into host code
and launches, which inserts nothing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from tilecert.checker.check import check_program
from tilecert.checker.gate import cached
from tilecert.checker.verdict import Report
from tilecert.semantics import ir
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.serialize import dump

from .barriers import place_barriers
from .lower import bind_sizes, lower
from .modulo import realize_plans
from .program import Lowered
from .validation import ValidationError, refuses, validate

THREADED = ("cuda", "cuda-host")  # targets that run block / warp / lane participants as threads


@dataclass(frozen=True)
class Lowering:
    """What the pipeline made: the loop-form program it lowered (sizes bound, barriers placed for a
    threaded target), the lowered program, its translation validation and, for a threaded target,
    the checker's report on the program with its barriers (None where the pass changed nothing)."""

    program: ir.Program
    lowered: Lowered
    validation: Report
    barriers: Optional[Report] = None


def lower_for(target: str, program: ir.Program, sizes: Mapping[str, int],
              hardware: Target = DEFAULT_TARGET) -> Lowering:
    """``program`` (scheduled loop form) lowered and validated for ``target`` with ``sizes`` bound."""
    threaded = target in THREADED
    p = bind_sizes(program, sizes)
    p = realize_plans(p, sizes, asynchronous=threaded)
    placed = place_barriers(p, hardware, sizes) if threaded else p
    text = dump(placed)
    report = None
    if placed is not p:  # it binds a GPU scope: check what the threads run
        p = placed
        report = cached(("placed barriers", text, hardware), sizes, lambda: check_program(
            p, sizes, target=hardware, subject=f"kernel {p.name} as its threads run it"))
    lp = lower(p, sizes, threaded)
    validation = cached(("validation", text, repr(lp)), sizes, lambda: validate(p, lp, sizes))
    if refuses(validation):
        raise ValidationError(validation, f"lowering of {program.name}")
    return Lowering(p, lp, validation, report)
