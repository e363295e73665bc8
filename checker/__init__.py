"""tilecert.checker: islpy and z3 discharge the obligations of programs and schedule ops.

``check`` takes a schedule, a kernel or a program and returns a ``Report`` of verdicts
(proved / disproved with a witness / unknown with a reason). See ``check.py`` for what is
checked, ``model.py`` and ``order.py`` for the polyhedral model, ``obligations/`` for one
module per obligation kind, each with its formula.
"""
from .check import check, check_program, check_schedule, check_transform
from .errors import CheckerError
from .target import DEFAULT_TARGET, Target
from .verdict import DISPROVED, PROVED, UNKNOWN, Instance, Report, Result, Verdict, Witness

__all__ = ["check", "check_program", "check_schedule", "check_transform", "CheckerError", "Target", "DEFAULT_TARGET",
           "Report", "Result", "Verdict", "Witness", "Instance", "PROVED", "DISPROVED", "UNKNOWN"]
