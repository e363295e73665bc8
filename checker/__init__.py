"""tilecert.checker: islpy and z3 discharge the obligations of programs and schedule ops.

``check`` takes a schedule, a kernel or a program and returns a ``Report`` of verdicts
(proved / disproved with a witness / unknown with the reason); ``check_program`` and
``check_transform`` check one program or one rewrite ``(before, after, tau)``.

Modules: ``model`` (statements, instances, accesses, buffers of a loop-form program),
``order`` (the execution order, barrier phases), ``correspondence`` and ``agreement`` (what
tau maps each new instance to, and whether it does the same operation), ``forwarding``
(comparing through temporaries a transform introduces), ``obligations/`` (one module per
obligation kind, each with its formula), ``formula`` / ``solve`` / ``isl_solve`` /
``z3_solve`` (the queries and the solvers), ``polyhedral`` (the model as isl sets and
maps), ``replay`` (witnesses re-run on the interpreter), ``brute`` (the brute-force
enumeration oracle the tests and the benchmark hold the checker against), ``verdict``
(verdicts, witnesses, reports), ``gate`` (the cached check that emission,
compilation and the differential harness require). The hardware model (``Target``, the containment order) is
``semantics.bindings``, re-exported here.
"""
from tilecert.semantics.bindings import DEFAULT_TARGET, Target

from .check import check, check_program, check_schedule, check_transform
from .errors import CheckerError
from .gate import Proof, UnprovedScheduleError, require
from .verdict import DISPROVED, PROVED, UNKNOWN, Instance, Report, Result, Verdict, Witness

__all__ = ["check", "check_program", "check_schedule", "check_transform", "CheckerError", "Proof", "UnprovedScheduleError",
           "require", "Target", "DEFAULT_TARGET",
           "Report", "Result", "Verdict", "Witness", "Instance", "PROVED", "DISPROVED", "UNKNOWN"]
