"""Pictures of loop-form programs: ``tc.plot(subject, result=None, view="space" | "phases")``.

Every picture is drawn at concrete sizes: the sizes the schedule binds, then ``sizes``, then
``replay.DEFAULT_SIZE`` for any size still free (the title lists them all). Instances are
enumerated as the brute-force oracle does (``checker.brute.Enumeration``), so a picture shows
exactly the instances the program runs, nothing inferred.

- ``view="space"``: the iteration space of one statement (default: the last statement that
  writes a tensor). Each instance is a point; its column is the mixed-radix number of the
  coordinates of the loops the written cell's last index uses, its row that of the loops the
  other indices use (outermost loop most significant), so a tiled loop pair draws as the
  element it covers; a statement on a scalar cell puts its innermost loop on the columns and
  the others on the rows. The colour is the instance's tile: its coordinates on the loops bound to
  an independent scope (grid, core, vector), else on the owner loops of the buffers it
  accesses, else on its outermost loop. The side panel lists each loop with its kind and
  binding, coloured by its order class (independent blue, threads orange, ordered black).
- a ``Result`` (or ``Witness``) of a disproved obligation: the witness drawn on the space of
  each statement it names (one panel per statement and role: ``old`` instances live in the
  program before the op, the others in the program after it; ``statement`` does not apply),
  the loops where its two instances differ added to the columns; the instances are marked A
  and B (their images A' and B'), and the cell, the summary and the replay outcome are
  written under the panels.
- ``view="phases"``: the barrier phases of a thread block: the statements under loops bound
  to block / warp / lane scopes in program order, a new phase after each explicit barrier
  and at the end of each threads loop (the implicit synchronisation of ``checker/order.py``);
  each phase is a bar as long as its number of participating threads in the first block.

Figures are ``matplotlib.figure.Figure`` objects (no pyplot, no global state): save them with
``fig.savefig(path)``. matplotlib is the optional extra ``plot``; without it ``PlotError``
says how to install it.
"""
from __future__ import annotations

import importlib
import textwrap
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

from tilecert.checker.brute import BInst, Enumeration
from tilecert.checker.check import subjects
from tilecert.checker.model import LoopRec, Model, Stmt
from tilecert.checker.replay import complete_sizes
from tilecert.checker.verdict import Instance, Result, Witness
from tilecert.semantics import ir
from tilecert.semantics.bindings import INDEPENDENT_SCOPES
from tilecert.semantics.errors import InputError
from tilecert.semantics.expand import expand
from tilecert.semantics.index import free_vars
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.sched.schedule import Schedule

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 20000
VIEWS = ("space", "phases")
ORDER_COLOURS = {"independent": "tab:blue", "threads": "tab:orange", "ordered": "black"}
INSTALL_HINT = "install the plot extra: pip install 'tilecert[plot]' (or pip install matplotlib)"
Subject = Union[Schedule, Kernel, ir.Program]


class PlotError(InputError):
    """A picture that cannot be drawn: matplotlib missing, an unknown statement or view, too many instances."""


def plot(subject: Subject, result: Optional[Union[Result, Witness]] = None, *, view: str = "space",
         statement: Optional[str] = None, sizes: Optional[Mapping[str, int]] = None) -> "Figure":
    """A figure of ``subject``'s final program: its iteration space, a witness drawn on it, or its barrier phases."""
    figure_class = _figure_class()
    if view not in VIEWS:
        raise PlotError(f"unknown view {view!r}", None, f"views: {', '.join(VIEWS)}")
    if result is not None and view != "space":
        raise PlotError("a witness is drawn on the iteration space, not on the phases", None,
                        "draw tc.plot(s, result) and tc.plot(s, view='phases') apart")
    if result is not None:
        witness = result.verdict.witness if isinstance(result, Result) else result
        if witness is None:
            raise PlotError("the result has no witness to draw", None, "pass a disproved result (r.verdict.witness)")
        return _witness_figure(figure_class(), subject, result, witness, sizes)
    program, bound = _final(subject)
    at = complete_sizes(program, {**bound, **dict(sizes or {})})
    en = Enumeration(Model(program, at), at)
    if view == "phases":
        return _phases_figure(figure_class, en, program)
    fig = figure_class(figsize=(8.5, 5))
    stmt = _statement(en.m, statement)
    _space(fig.add_gridspec(1, 3)[0, :2], fig, en, stmt, [], ())
    _loops_panel(fig.add_subplot(1, 3, 3), stmt)
    fig.suptitle(f"{program.name}: `{_short(stmt.label())}` at {_shown(at)}", fontsize=9)
    return fig


# ----------------------------------------------------------------------------- subjects and statements
def _figure_class() -> Any:
    try:
        return importlib.import_module("matplotlib.figure").Figure
    except ImportError as exc:
        raise PlotError("tc.plot needs matplotlib, which is not installed", None, INSTALL_HINT) from exc


def _final(subject: Subject) -> tuple[ir.Program, dict[str, int]]:
    """The loop-form program a picture shows, and the sizes bound on it."""
    if isinstance(subject, Schedule):
        return subject.program, dict(subject.sizes)
    if isinstance(subject, Kernel):
        subject = subject.capture()
    if isinstance(subject, ir.Program):
        return expand(subject), {}
    raise PlotError(f"cannot draw a {type(subject).__name__}", None, "pass a Schedule, a @tc.kernel or a Program")


def _programs(subject: Subject, result: Union[Result, Witness]) -> tuple[ir.Program, ir.Program, dict[str, int]]:
    """The programs before and after the op a result is about (the same program for a program's own obligations)."""
    if isinstance(subject, Schedule) and isinstance(result, Result):
        names = subjects(subject)
        if result.subject not in names:
            raise PlotError(f"the result is about {result.subject!r}, not a step of this schedule", None,
                            "pass the schedule the report was checked from")
        k = names.index(result.subject)
        return subject.programs[max(k - 1, 0)], subject.programs[k], dict(subject.sizes)
    program, bound = _final(subject)
    return program, program, bound


def _statement(m: Model, text: Optional[str]) -> Stmt:
    """The statement whose label is (or contains) ``text``; by default the last one writing a tensor."""
    effectful = [s for s in m.effectful if s.kind != "decl"]
    if text is None:
        writes = [s for s in effectful if s.target is not None and s.target.scope == "global" and s.target.decl is None]
        if not (writes or effectful):
            raise PlotError(f"program {m.program.name} has no statement to draw", m.program.loc, "")
        return (writes or effectful)[-1]
    exact = [s for s in m.statements if s.label() == text]
    found = exact or [s for s in m.statements if text in s.label()]
    if len(found) != 1:
        listed = "; ".join(s.label() for s in effectful)[:400]
        raise PlotError(f"{len(found)} statements match {text!r}", m.program.loc, f"statements: {listed}")
    return found[0]


# ----------------------------------------------------------------------------- the iteration space
def _axes(stmt: Stmt, extra: Sequence[str]) -> tuple[list[int], list[int]]:
    """Positions (in ``stmt.loops``) of the loops on the columns and on the rows (see the module doc)."""
    index = getattr(stmt.node, "index", ()) or ()
    used = [{v for v, _ in free_vars(e)} for e in index]
    col_vars = used[-1] if used else set()
    row_vars = set().union(*used[:-1]) - col_vars if len(used) > 1 else set()
    cols = [k for k, lp in enumerate(stmt.loops) if lp.var in col_vars]
    rows = [k for k, lp in enumerate(stmt.loops) if lp.var in row_vars and k not in cols]
    if not (cols or rows) and stmt.loops:  # a scalar cell: the loops themselves
        cols, rows = [len(stmt.loops) - 1], list(range(len(stmt.loops) - 1))
    added = [k for k, lp in enumerate(stmt.loops) if lp.name in extra and k not in cols + rows]
    return sorted(cols + added), rows


def _tile_loops(stmt: Stmt) -> list[int]:
    bound = [k for k, lp in enumerate(stmt.loops) if lp.binding in INDEPENDENT_SCOPES]
    if bound:
        return bound
    owners = {id(lp.node) for lp in max((a.buffer.owner_loops for a in stmt.accesses), key=len, default=())}
    return [k for k, lp in enumerate(stmt.loops) if id(lp.node) in owners] or ([0] if stmt.loops else [])


def _radix(points: Sequence[BInst], positions: Sequence[int]) -> list[int]:
    return [max((x.coords[k] for x in points), default=0) + 1 for k in positions]


def _linear(x: Union[BInst, Sequence[int]], positions: Sequence[int], radix: Sequence[int]) -> int:
    coords = x.coords if isinstance(x, BInst) else x
    value = 0
    for k, r in zip(positions, radix):
        value = value * r + int(coords[k])
    return value


def _space(spec: Any, fig: Any, en: Enumeration, stmt: Stmt, marks: Sequence[tuple[str, Instance]],
           extra: Sequence[str]) -> Any:
    """Draw ``stmt``'s instances in ``spec`` of ``fig``, with the witness instances ``marks`` (label, instance)."""
    points = en.instances(stmt)
    if len(points) > MAX_POINTS:
        raise PlotError(f"`{_short(stmt.label())}` has {len(points)} instances at {_shown(en.sizes)}, more than "
                        f"{MAX_POINTS} to draw", en.m.program.loc, "pass smaller sizes, e.g. tc.plot(s, sizes={...})")
    ax = fig.add_subplot(spec)
    cols, rows = _axes(stmt, extra)
    radix_c, radix_r = _radix(points, cols), _radix(points, rows)
    tiles = _tile_loops(stmt)
    keys = sorted({tuple(x.coords[k] for k in tiles) for x in points})
    colour = {key: n for n, key in enumerate(keys)}
    xs = [_linear(x, cols, radix_c) for x in points]
    ys = [_linear(x, rows, radix_r) for x in points]
    ax.scatter(xs, ys, c=[colour[tuple(x.coords[k] for k in tiles)] for x in points], cmap="tab20", s=36,
               marker="s", vmin=0, vmax=max(len(keys) - 1, 1), alpha=0.8)
    for label, inst in marks:
        at = dict(inst.coords)
        coords = [at.get(lp.name, 0) for lp in stmt.loops]
        if any(not isinstance(c, int) for c in coords):
            continue
        px, py = _linear(coords, cols, radix_c), _linear(coords, rows, radix_r)
        ax.scatter([px], [py], s=260, facecolors="none", edgecolors="black", linewidths=2)
        ax.annotate(label, (px, py), xytext=(6, 6), textcoords="offset points", fontsize=11, weight="bold")
    ax.set_xlabel("columns: " + (" * ".join(stmt.loops[k].name for k in cols) or "-"), fontsize=8)
    ax.set_ylabel("rows: " + (" * ".join(stmt.loops[k].name for k in rows) or "-"), fontsize=8)
    ax.invert_yaxis()
    tile_names = ", ".join(stmt.loops[k].name for k in tiles) or "-"
    ax.set_title(f"{len(points)} instances, {len(keys)} tiles (colour: {tile_names})", fontsize=8)
    return ax


def _loops_panel(ax: Any, stmt: Stmt) -> None:
    """The statement's loops, outermost first, each coloured by how its iterations are ordered
    (``LoopRec.order``: independent, threads or ordered) and named with its binding."""
    ax.axis("off")
    ax.text(0, 1, "loops (outermost first):", va="top", family="monospace", fontsize=7, transform=ax.transAxes)
    for k, lp in enumerate(stmt.loops):
        bind = f" -> {lp.node.binding}" if lp.node.binding else ""
        ax.text(0, 0.94 - 0.06 * k, f"{'  ' * k}{lp.name}: {lp.node.kind}{bind} ({lp.order})", va="top",
                family="monospace", fontsize=7, color=ORDER_COLOURS[lp.order], transform=ax.transAxes)


# ----------------------------------------------------------------------------- witnesses
def _witness_figure(fig: Any, subject: Subject, result: Union[Result, Witness], witness: Witness,
                    sizes: Optional[Mapping[str, int]]) -> Any:
    before, after, bound = _programs(subject, result)
    at = {**bound, **dict(sizes or {}), **dict(witness.sizes)}
    panels: dict[tuple[str, str], list[tuple[str, Instance]]] = {}
    labels = _labels(witness.instances)
    for label, inst in zip(labels, witness.instances):
        panels.setdefault((inst.role, inst.statement), []).append((label, inst))
    differ = _differing(witness.instances)
    fig.set_size_inches(max(5.0 * len(panels), 6.0), 6.5)
    grid = fig.add_gridspec(2, max(len(panels), 1), height_ratios=[3, 1])
    for n, ((role, text), marks) in enumerate(panels.items()):
        program = before if role == "old" else after
        sized = complete_sizes(program, at)
        en = Enumeration(Model(program, sized), sized)
        ax = _space(grid[0, n], fig, en, _statement(en.m, text), marks, differ)
        ax.set_title(f"{role + ' ' if role else ''}{program.name}: `{_short(text, 50)}`\n{ax.get_title()}", fontsize=8)
    notes = fig.add_subplot(grid[1, :])
    notes.axis("off")
    lines = [f"{label}: {inst}" for label, inst in zip(labels, witness.instances)] + \
        [line for line in witness.lines() if not line.startswith("instance: ")]
    width = int(fig.get_figwidth() * 15)
    wrapped = "\n".join(textwrap.fill(line, width, subsequent_indent="    ") for line in lines)
    notes.text(0, 1, wrapped, va="top", family="monospace", fontsize=7, transform=notes.transAxes)
    kind = f"{result.kind} at {result.subject}" if isinstance(result, Result) else "witness"
    fig.suptitle(textwrap.fill(f"{kind}: {witness.summary}", width), fontsize=9)
    return fig


def _labels(instances: Sequence[Instance]) -> list[str]:
    """A and B for the two instances of a pair; A' and B' for their images when a witness lists four."""
    return ["AB"[n % 2] + "'" * (n // 2) for n in range(len(instances))]


def _differing(instances: Sequence[Instance]) -> list[str]:
    """The loops on which the witness's instances have different coordinates."""
    if len(instances) < 2:
        return []
    a, b = dict(instances[0].coords), dict(instances[1].coords)
    return [name for name in a if name in b and a[name] != b[name]]


# ----------------------------------------------------------------------------- barrier phases
def _phases(en: Enumeration) -> list[tuple[str, list[Stmt]]]:
    """The phases of a block: (what ends the phase, its statements), in program order."""
    out: list[tuple[str, list[Stmt]]] = []
    current: list[Stmt] = []
    loop_of_phase: Optional[LoopRec] = None
    for s in sorted(en.m.statements, key=lambda t: t.path):
        threads = [lp for lp in s.loops if lp.order == "threads"]
        if not threads:
            continue
        outer = threads[0]
        if current and loop_of_phase is not None and outer.node is not loop_of_phase.node:
            out.append((f"end of threads loop {loop_of_phase.name} (implicit)", current))
            current = []
        loop_of_phase = outer
        if s.kind == "barrier":
            out.append((f"barrier({s.node.scope})", current))
            current = []
        elif s.kind != "decl":
            current.append(s)
    if current and loop_of_phase is not None:
        out.append((f"end of threads loop {loop_of_phase.name} (implicit)", current))
    return out


def _participants(en: Enumeration, s: Stmt) -> int:
    """How many threads of the first block run ``s`` (distinct thread coordinates, outer coordinates fixed)."""
    threads = [k for k, lp in enumerate(s.loops) if lp.order == "threads"]
    others = [k for k in range(len(s.loops)) if k not in threads and k < threads[0]]
    points = en.instances(s)
    if not points:
        return 0
    first = tuple(points[0].coords[k] for k in others)
    return len({tuple(x.coords[k] for k in threads) for x in points if tuple(x.coords[k] for k in others) == first})


def _phases_figure(fig_class: Any, en: Enumeration, program: ir.Program) -> Any:
    phases = _phases(en)
    if not phases:
        raise PlotError(f"program {program.name} binds no loop to block, warp or lane threads: it has no barrier phases",
                        program.loc, "bind loops to threads first, e.g. s.bind(loop, 'block0')")
    fig = fig_class(figsize=(9, 1.0 + 0.9 * len(phases)))
    ax = fig.add_subplot(1, 1, 1)
    width = max((_participants(en, s) for _, stmts in phases for s in stmts), default=1) or 1
    for n, (end, stmts) in enumerate(phases):
        count = max((_participants(en, s) for s in stmts), default=0)
        ax.barh(n, count, color=f"C{n % 10}", alpha=0.5, height=0.7)
        ordered = sorted({lp.name for s in stmts for lp in s.loops if lp.order == "ordered"})
        text = "; ".join(_short(s.label(), 60) for s in stmts[:3]) + (f"; +{len(stmts) - 3} more" if len(stmts) > 3
                                                                       else "")
        where = f"  [in ordered loops {', '.join(ordered)}]" if ordered else ""
        ax.text(width * 0.01, n, f"{count} threads: {text}{where}", va="center", fontsize=7, family="monospace")
        explicit = end.startswith("barrier")
        ax.axhline(n + 0.5, color="red" if explicit else "grey", linestyle="-" if explicit else "--", linewidth=1)
        ax.text(width, n + 0.5, end, va="center", ha="right", fontsize=7, color="red" if explicit else "grey",
                backgroundcolor="white")
    ax.set_yticks(range(len(phases)), [f"phase {n}" for n in range(len(phases))], fontsize=8)
    ax.set_xlim(0, width * 1.02)
    ax.set_xlabel("participating threads of the first block", fontsize=8)
    ax.invert_yaxis()
    fig.suptitle(f"{program.name}: barrier phases at {_shown(en.sizes)}", fontsize=9)
    return fig


# ----------------------------------------------------------------------------- text
def _short(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _shown(sizes: Mapping[str, int]) -> str:
    return ", ".join(f"{n}={v}" for n, v in sorted(sizes.items())) or "no sizes"
