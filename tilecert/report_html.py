"""``tilecert explain FILE --html OUT``: one self-contained HTML page of what was checked and emitted.

For each kernel and schedule of the file (named ``KERNEL/SCHEDULE`` as on the command line) the
page has, in this order: the verdict (``OK`` only when every obligation is proved, as
``Report.ok``; otherwise the counts that keep it from being a proof), the ops (``Schedule.explain``:
each op with its tau and stated obligations) and the final program, the iteration space picture,
the barrier phases where loops are bound to threads, every obligation with its verdict, engine,
formula and reason, every witness with its picture (``pictures.plot``), and the emitted code
(``tc.emit(..., allow_unproved=True)``: an unproved schedule's code carries its ``NOT PROVED``
lines, and the page says it is not a certificate).

The page is one file: inline CSS, pictures as ``data:image/png;base64`` URIs, no script, no
network. Without matplotlib the pictures are replaced by a note that says how to install it.
"""
from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from tilecert.backends import emit
from tilecert.checker.check import check
from tilecert.checker.verdict import DISPROVED, Report, Result
from tilecert.progress import name_of, verdict_word
from tilecert.semantics.errors import TilecertError
from tilecert.semantics.printer import format_program
from tilecert.semantics.sched.schedule import Schedule

from .pictures import PlotError, plot

DPI = 80
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { border-bottom: 2px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .5em 0; font-size: .85em; }
td, th { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; font-size: .8em; }
code { font-size: .9em; }
.proved { color: #176317; font-weight: bold; } .disproved { color: #b00020; font-weight: bold; }
.unknown { color: #8a5a00; font-weight: bold; }
.ok { background: #e3f4e3; } .notok { background: #fbe3e6; }
.verdict { display: inline-block; padding: .2em .6em; border-radius: .3em; font-weight: bold; }
.note { color: #666; font-style: italic; } img { max-width: 100%; border: 1px solid #ddd; }
"""


def render(found: Mapping[str, Any], title: str, *, target: str = "c", timeout_ms: int = 2000) -> tuple[str, bool]:
    """The page for ``found`` (``name -> Schedule | Kernel``), checked and emitted for ``target``, and whether
    every one of them was proved."""
    sections = [(name_of(name, obj), obj, check(obj, timeout_ms=timeout_ms)) for name, obj in found.items()]
    rows = "".join(f"<tr><td><a href='#{_anchor(label)}'>{_e(label)}</a></td>{_verdict_cell(r)}"
                   f"<td>{_e(r.scope() or '-')}</td></tr>" for label, _, r in sections)
    body = "".join(_section(label, obj, r, target) for label, obj, r in sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>tilecert report: {_e(title)}</h1>"
            f"<section id='summary'><table><tr><th>kernel/schedule</th><th>verdict</th><th>scope</th></tr>{rows}"
            f"</table></section>{body}</body></html>"), all(r.ok for _, _, r in sections)


def write(path: Path, found: Mapping[str, Any], title: str, *, target: str = "c", timeout_ms: int = 2000) -> bool:
    """Write the page of ``render(...)`` to ``path``; whether every subject was proved."""
    page, ok = render(found, title, target=target, timeout_ms=timeout_ms)
    path.write_text(page, encoding="utf-8")
    return ok


# ----------------------------------------------------------------------------- one kernel or schedule
def _section(label: str, obj: Any, report: Report, target: str) -> str:
    schedule = obj if isinstance(obj, Schedule) else None
    ops = schedule.explain() if schedule is not None and schedule.history else "no ops: the kernel as written"
    final = format_program(schedule.program) if schedule is not None else format_program(obj.capture())
    parts = [f"<section class='subject' id='{_anchor(label)}'><h2>{_e(label)}</h2>",
             f"<p>{_verdict_span(report)} {_e(report.scope())}</p>",
             f"<h3>ops</h3><pre class='ops'>{_e(ops)}</pre>",
             f"<details><summary>final program</summary><pre>{_e(final)}</pre></details>",
             "<h3>iteration space</h3>", _picture(lambda: plot(obj), f"iteration space of {label}")]
    try:
        parts += ["<h3>barrier phases</h3>", _png(plot(obj, view="phases"), f"barrier phases of {label}")]
    except PlotError:
        pass  # no loop bound to threads (or no matplotlib, which the space picture above says)
    parts += ["<h3>obligations</h3>", _obligations(report), "<h3>witnesses</h3>", _witnesses(obj, report, label),
              f"<h3>emitted code ({_e(target)})</h3>", _code(obj, report, target), "</section>"]
    return "".join(parts)


def _obligations(report: Report) -> str:
    rows = "".join(f"<tr><td>{_e(r.subject)}</td><td>{_e(r.kind)}</td><td class='{r.status}'>{r.status}</td>"
                   f"<td>{_e(r.verdict.engine)}</td><td><code>{_e(r.formula)}</code></td>"
                   f"<td>{_e(r.verdict.reason)}</td></tr>" for r in report)
    return (f"<table class='obligations'><tr><th>step</th><th>obligation</th><th>verdict</th><th>engine</th>"
            f"<th>formula</th><th>reason</th></tr>{rows}</table>")


def _witnesses(obj: Any, report: Report, label: str) -> str:
    found = [r for r in report if r.verdict.witness is not None]
    if not found:
        return "<p class='note'>no witness: nothing was disproved</p>"
    return "".join(_witness(obj, r, label) for r in found)


def _witness(obj: Any, r: Result, label: str) -> str:
    assert r.verdict.witness is not None
    text = "\n".join(r.verdict.witness.lines())
    picture = _picture(lambda: plot(obj, r), f"witness of {r.kind} at {r.subject} ({label})") \
        if r.status == DISPROVED else ""
    return (f"<div class='witness'><h4>{_e(r.kind)} <span class='{r.status}'>{r.status}</span> at "
            f"{_e(r.subject)}</h4><pre>{_e(text)}</pre>{picture}</div>")


def _code(obj: Any, report: Report, target: str) -> str:
    try:
        source = emit(obj, target=target, allow_unproved=True)
    except TilecertError as exc:
        return f"<p class='note'>not emitted: {_e(exc.message)} (hint: {_e(exc.hint)})</p>"
    warning = "" if report.ok else "<p class='disproved'>NOT A CERTIFICATE: emitted with allow_unproved=True</p>"
    lines = source.count("\n") + 1
    return f"{warning}<details class='code'><summary>{lines} lines</summary><pre>{_e(source)}</pre></details>"


# ----------------------------------------------------------------------------- pieces
def _picture(draw: Callable[[], Any], alt: str) -> str:
    """The figure ``draw()`` returns as an inline PNG, or a note saying why there is none."""
    try:
        return _png(draw(), alt)
    except TilecertError as exc:
        return f"<p class='note'>no picture: {_e(exc.message)} ({_e(exc.hint)})</p>"


def _png(fig: Any, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img class='picture' alt='{_e(alt)}' src='data:image/png;base64,{data}'>"


def _verdict_span(report: Report) -> str:
    return f"<span class='verdict {'ok' if report.ok else 'notok'}'>{_e(verdict_word(report))}</span>"


def _verdict_cell(report: Report) -> str:
    return f"<td>{_verdict_span(report)}</td>"


def _anchor(label: str) -> str:
    return "s-" + re.sub(r"[^A-Za-z0-9_-]", "-", label)


def _e(text: Optional[str]) -> str:
    return html.escape(text or "", quote=True)
