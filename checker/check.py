"""``check``: discharge every obligation of a program, a transform, or a whole schedule.

- a program (a kernel, a tile program, or a loop-form program): ``noninterference``,
  ``reduction_policy``, ``barrier_uniform``, ``bounds``, ``layout`` (where it declares a buffer with
  a layout), ``containment``, ``hardware_limits``, and ``pipeline_schedule``, ``versions``, ``release`` of
  every pipeline loop with a plan (``plans.py``);
- a transform ``(before, after, tau)``: ``coverage``, ``prefix_cut``, ``dependence`` between
  the two, and the program obligations of ``after`` (``containment`` and ``hardware_limits``
  only when it is final: an intermediate program need not fit the machine yet);
- a ``Schedule``: its initial program, then every op of its history as a transform from the
  program before the op to the program after it (both as the schedule stored them, i.e.
  after the simplifier ran, so the simplifier's rewrites are checked too).

A transform that mints buffers is compared through them as its op declares them
(``Transformed.datamaps``): each declaration is verified first (``datamap``, ``forwarding.py``),
and a declaration not proved leaves the comparison unknown. A copy or ring declared ``zero_fringe``
is discharged as its own obligation (``zero_fringe``, ``forwarding.zero_fringe``). Per op, the
report keeps the kinds the op stated (``Report.stated``) beside the results (``Report.contract``): a stated kind with no
decision procedure here is reported unknown; ``containment`` and ``hardware_limits`` stated by an op
before the last are discharged on the final program.
Along a schedule, a program obligation proved before an op is re-checked after it only for
the statements and pairs the op touched (the rest are, term for term, the same formulas).
Sizes: a schedule's bound sizes plus ``sizes`` (which may fix more sizes, never contradict a
bound one: ``CheckerError``); every other size stays symbolic (>= 0), and the report says
so (``Report.sizes``, ``Report.symbolic``, ``Report.scope()``). A disproved verdict's
witness is replayed on the interpreter at the witness's sizes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Collection, Mapping, Optional, Sequence

from tilecert.semantics import ir
from tilecert.semantics.expand import expand
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.transform import DataMap, History, Kind, Obligation, Renamed, Tau

from . import forwarding, replay as replays
from .correspondence import Correspondence, correspond
from .errors import CheckerError
from .model import Model
from .plans import plan_checks
from .obligations import (barrier_uniform, bounds, containment, coverage, dependence, hardware_limits, layout,
                          noninterference, prefix_cut, reduction_policy)
from .solve import DEFAULT_TIMEOUT_MS
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from .verdict import DISPROVED, Report, Result, Verdict, unknown, with_origin, with_replay

DISCHARGED = frozenset({Kind.COVERAGE, Kind.PREFIX_CUT, Kind.DEPENDENCE, Kind.DATAMAP, Kind.NONINTERFERENCE,
                        Kind.REDUCTION_POLICY, Kind.BARRIER_UNIFORM, Kind.BOUNDS, Kind.CONTAINMENT,
                        Kind.HARDWARE_LIMITS, Kind.ZERO_FRINGE, Kind.LAYOUT, Kind.PIPELINE_SCHEDULE, Kind.VERSIONS,
                        Kind.RELEASE})
"""The obligation kinds this checker decides; a stated kind outside it is reported unknown."""


def check(subject: Any, sizes: Optional[Mapping[str, int]] = None, *, target: Target = DEFAULT_TARGET,
          timeout_ms: int = DEFAULT_TIMEOUT_MS, replay: bool = True) -> Report:
    """Check a ``Schedule`` (every op), a ``@tc.kernel`` or a ``Program`` (its own obligations)."""
    if isinstance(subject, History):
        return check_schedule(subject, sizes, target=target, timeout_ms=timeout_ms, replay=replay)
    if isinstance(subject, Kernel):
        subject = subject.capture()
    if isinstance(subject, ir.Program):
        return check_program(expand(subject), sizes, target=target, timeout_ms=timeout_ms, replay=replay)
    raise CheckerError(f"cannot check a {type(subject).__name__}",
                       hint="pass a Schedule (tc.schedule), a @tc.kernel, or a Program")


def check_program(program: ir.Program, sizes: Optional[Mapping[str, int]] = None, *,
                  target: Target = DEFAULT_TARGET, timeout_ms: int = DEFAULT_TIMEOUT_MS, replay: bool = True,
                  subject: Optional[str] = None, final: bool = True) -> Report:
    """The obligations of one loop-form program."""
    m = _model(program, sizes)
    if m.problems:
        raise CheckerError(f"program {program.name} is ill-formed: {m.problems[0]}",
                           hint="every loop variable and buffer must be read inside the loop or block that binds it")
    return _scoped(_program_report(m, subject or f"program {program.name}", final, target, timeout_ms, replay, ()),
                   program, m.sizes)


def check_transform(before: ir.Program, after: ir.Program, tau: Tau, sizes: Optional[Mapping[str, int]] = None, *,
                    target: Target = DEFAULT_TARGET, timeout_ms: int = DEFAULT_TIMEOUT_MS, replay: bool = True,
                    subject: str = "transform", listed: Sequence[Obligation] = (), final: bool = True,
                    proved_before: Collection[str] = (), datamaps: Sequence[DataMap] = ()) -> Report:
    """The obligations of rewriting ``before`` into ``after`` with coordinate map ``tau``; ``datamaps`` are
    the transform's declarations of the buffers it mints. For the program obligation kinds in
    ``proved_before`` (proved of ``before``), the statements and pairs the transform left untouched
    (``Correspondence.kept``, ``kept_pair``) are not checked again. Every kind of ``listed`` without a
    result here (but ``containment`` and ``hardware_limits`` when not ``final``: the final program decides
    them) is reported unknown; nothing is proved when ``before`` is ill-formed."""
    old, new = _model(before, sizes), _model(after, sizes)
    report = Report()
    memo: dict[str, Any] = {}  # the correspondence and what is compared, once computed

    def comparison() -> Any:
        if "compared" not in memo:
            memo["c"] = correspond(old, new, tau, timeout_ms, datamaps)
            memo["compared"], memo["declared"] = forwarding.read_through(memo["c"], tau, timeout_ms, datamaps)
        return memo["compared"]

    def verdict(kind: Kind, module: Any) -> Verdict:
        if old.problems:
            return _ill_formed(old, "the program before the transform")
        if new.problems and kind != Kind.COVERAGE:
            return _ill_formed(new)
        compared = comparison()
        return unknown(compared, "isl") if isinstance(compared, str) else module.check(compared, timeout_ms)

    def declarations() -> Verdict:
        if old.problems or new.problems:
            return _ill_formed(old, "the program before the transform") if old.problems else _ill_formed(new)
        comparison()
        return memo["declared"] or unknown("the transformed program mints no buffer the op declares", "structure")

    again = (lambda s: replays.replay_transform(before, after, s)) if replay else None
    if any(not isinstance(d, Renamed) for d in datamaps):
        report.results.append(discharge(Kind.DATAMAP, subject, forwarding.FORMULA, listed, declarations, again,
                                      old.sizes))
    if any(getattr(d, "zero_fringe", False) for d in datamaps):
        report.results.append(discharge(Kind.ZERO_FRINGE, subject, forwarding.ZERO_FRINGE, listed,
                                      lambda: _ill_formed(new) if new.problems else
                                      forwarding.zero_fringe(new, datamaps, timeout_ms), again, old.sizes))
    for kind, module in ((Kind.COVERAGE, coverage), (Kind.PREFIX_CUT, prefix_cut), (Kind.DEPENDENCE, dependence)):
        report.results.append(discharge(kind, subject, module.FORMULA, listed, lambda: verdict(kind, module), again,
                                      old.sizes))
    c = memo.get("c")
    report.extend(_program_report(new, subject, final, target, timeout_ms, replay, listed,
                                  c if not (c is None or new.problems or c.fresh) else None, proved_before))
    deferred = () if final else (Kind.CONTAINMENT, Kind.HARDWARE_LIMITS)  # decided of the final program
    for ob in listed:
        if ob.kind not in deferred and not any(r.kind == ob.kind for r in report):
            why = (f"the checker does not discharge {ob.kind} obligations" if ob.kind not in DISCHARGED else
                   f"the op states a {ob.kind} obligation that nothing in this transform decides")
            report.results.append(Result(ob.kind, subject, ob.formula, unknown(why)))
    report.stated[subject] = tuple(dict.fromkeys(ob.kind for ob in listed))
    return _scoped(report, before, old.sizes)


def check_schedule(s: History, sizes: Optional[Mapping[str, int]] = None, *, target: Target = DEFAULT_TARGET,
                   timeout_ms: int = DEFAULT_TIMEOUT_MS, replay: bool = True,
                   on_step: Optional[Callable[[str, Report], None]] = None) -> Report:
    """The initial program's obligations, then those of every op of the history; ``on_step(subject, report)``
    is called after each step (the initial program, then each op) with that step's results."""
    conflicts = {n: v for n, v in dict(sizes or {}).items() if n in s.sizes and s.sizes[n] != v}
    if conflicts:
        raise CheckerError(f"check sizes {conflicts} contradict the sizes the schedule binds {s.sizes}",
                           s.initial.loc, "give only sizes the schedule leaves symbolic (or the bound values)")
    bound = {**s.sizes, **dict(sizes or {})}
    n = len(s.transforms)
    report = check_program(s.programs[0], bound, target=target, timeout_ms=timeout_ms, replay=replay,
                           subject=subjects(s)[0], final=n == 0)
    if on_step is not None:
        on_step(subjects(s)[0], report)
    previous = report
    for k, t in enumerate(s.transforms):
        proved = {r.kind for r in previous if r.verdict.proved}
        previous = check_transform(s.programs[k], s.programs[k + 1], t.tau, bound, target=target,
                                   timeout_ms=timeout_ms, replay=replay, subject=subjects(s)[k + 1],
                                   listed=t.obligations, final=k == n - 1, proved_before=proved,
                                   datamaps=t.datamaps)
        origin = f"{subjects(s)[k + 1]} at {s.call_sites[k]}"
        previous.results = [replace(r, verdict=with_origin(r.verdict, origin)) for r in previous.results]
        if on_step is not None:
            on_step(subjects(s)[k + 1], previous)
        report.extend(previous)
    report = _scoped(report, s.initial, bound)
    s.checks.append((len(s.history), report))
    return report


def subjects(s: History) -> list[str]:
    """The names of a schedule's initial program and of each op, as reports show them."""
    ops = [f"op {k}: {op}({', '.join(f'{a}={v!r}' for a, v in params.items())})"
           for k, (op, params) in enumerate(s.history)]
    return [f"initial program {s.initial.name}"] + ops


# ----------------------------------------------------------------------------- helpers
def _model(program: ir.Program, sizes: Optional[Mapping[str, int]]) -> Model:
    sizes = dict(sizes or {})
    unknown_sizes = sorted(set(sizes) - set(program.sizes))
    if unknown_sizes:
        raise CheckerError(f"unknown size(s) {unknown_sizes} for program {program.name}",
                           hint=f"its sizes are {list(program.sizes)}")
    for name, v in sizes.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise CheckerError(f"size {name} must be an int >= 0, got {v!r}", hint="or leave it symbolic")
    return Model(program, sizes)


def _scoped(report: Report, program: ir.Program, sizes: Mapping[str, int]) -> Report:
    """``report`` with the sizes it holds for: ``sizes`` bound, every other size of ``program`` symbolic."""
    report.sizes = dict(sizes)
    report.symbolic = tuple(name for name in program.sizes if name not in sizes)
    return report


def _ill_formed(m: Model, what: str = "the transformed program") -> Verdict:
    return unknown(f"{what} is ill-formed ({m.problems[0]})", "structure")


def _program_report(m: Model, subject: str, final: bool, target: Target, timeout_ms: int, replay: bool,
                    listed: Sequence[Obligation], c: Optional[Correspondence] = None,
                    proved_before: Collection[str] = ()) -> Report:
    again = (lambda s: replays.replay_program(m.program, s)) if replay else None

    def reuse(kind: str) -> bool:
        return c is not None and kind in proved_before

    pairs = (lambda s, t: c.kept_pair(s, t)) if c is not None else None
    checks: list[tuple[str, Any, Callable[[], Verdict]]] = [
        (Kind.NONINTERFERENCE, noninterference,
         lambda: noninterference.check(m, timeout_ms, pairs) if reuse(Kind.NONINTERFERENCE)
         else noninterference.check(m, timeout_ms)),
        (Kind.REDUCTION_POLICY, reduction_policy,
         lambda: reduction_policy.check(m, timeout_ms, pairs) if reuse(Kind.REDUCTION_POLICY)
         else reduction_policy.check(m, timeout_ms)),
        (Kind.BARRIER_UNIFORM, barrier_uniform, lambda: barrier_uniform.check(m, timeout_ms)),
        (Kind.BOUNDS, bounds,
         lambda: bounds.check(m, timeout_ms, c.kept) if reuse(Kind.BOUNDS) else bounds.check(m, timeout_ms)),
    ]
    if any(s.kind == "decl" and s.node.buf.layout is not None for s in m.statements):
        checks.append((Kind.LAYOUT, layout, lambda: layout.check(m, timeout_ms)))
    if final:
        checks += [(Kind.CONTAINMENT, containment, lambda: containment.check(m, target)),
                   (Kind.HARDWARE_LIMITS, hardware_limits, lambda: hardware_limits.check(m, target, timeout_ms))]
    report = Report()
    for kind, module, run in checks:
        replayable = kind not in (Kind.CONTAINMENT, Kind.HARDWARE_LIMITS, Kind.LAYOUT)
        report.results.append(discharge(kind, subject, module.FORMULA, listed, run if not m.problems else
                                      (lambda: _ill_formed(m)), again if replayable else None, m.sizes))
    for kind, formula, run in plan_checks(m.program, m.sizes, timeout_ms):  # no replay: sequentially a plan is no fault
        report.results.append(discharge(kind, subject, formula, listed, run if not m.problems else
                                      (lambda: _ill_formed(m)), None, m.sizes))
    return report


def discharge(kind: str, subject: str, formula: str, listed: Sequence[Obligation], run: Callable[[], Verdict],
             again: Optional[Callable[[dict[str, int]], str]], bound: Mapping[str, int]) -> Result:
    """The result of one obligation: ``run()``'s verdict, with its witness replayed. This is the one place
    obligations are discharged: an exception the checker or a solver raises there (a bug, an exhausted
    recursion, a solver error) makes the verdict unknown with its reason; it never proves anything."""
    try:
        verdict = run()
    except Exception as e:  # noqa: BLE001 -- any failure inside an obligation is an unknown verdict
        verdict = unknown(f"the checker failed while deciding it ({type(e).__name__}: {e})", "checker")
    stated = [ob.formula for ob in listed if ob.kind == kind]
    if stated:
        formula += " | the op states: " + "; ".join(stated)
    if verdict.status == DISPROVED and again is not None and verdict.witness is not None:
        verdict = with_replay(verdict, again({**bound, **dict(verdict.witness.sizes)}))
    return Result(kind, subject, formula, verdict)
