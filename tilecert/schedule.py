"""The public ``Schedule``: the op history of ``semantics.sched.Schedule`` plus ``s.check()``.

Checking is the checker's business and the checker sits above the op library
(``tilecert -> backends -> lowering -> checker -> semantics``), so the method that calls it lives
here, at the top, rather than in ``semantics``. ``tc.schedule``, ``tc.Schedule.load`` and the
strategies make schedules of this class; everything below the top reads a schedule through the
``History`` protocol (``semantics/transform.py``) and works on either class.
"""
from __future__ import annotations

import inspect
from typing import Any

from tilecert.checker import Report, check
from tilecert.semantics.errors import InputError
from tilecert.semantics.sched import schedule as history


class Schedule(history.Schedule):
    __doc__ = history.Schedule.__doc__

    def check(self, sizes: dict[str, int] | None = None, **options: Any) -> Report:
        """Discharge the obligations of the initial program and of every op (a checker ``Report``). The report is
        remembered: ``run`` at sizes no check of the current history covered warns (``UncheckedSizesWarning``)."""
        known = set(inspect.signature(check).parameters) - {"subject", "sizes"}
        if set(options) - known or not (sizes is None or isinstance(sizes, dict)):
            wrong = sorted(set(options) - known) or [f"sizes={sizes!r}"]
            raise InputError(f"s.check: {wrong[0]} is not an option of the check", self.program.loc,
                             f"s.check(sizes={{'N': 64}}, {', '.join(f'{k}=...' for k in sorted(known))})")
        return check(self, sizes, **options)
