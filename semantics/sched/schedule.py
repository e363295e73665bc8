"""``Schedule``: a kernel's loop form plus the ops applied to it, replayable and storable.

``s = tc.schedule(kernel, M=64, bm=16)`` captures the kernel (config values), expands it
to loop form and binds the given sizes (others stay symbolic). Each registered op is a
method (``s.split(...)``, made from the op's declaration: ``registry.py``) that validates its
arguments, applies the op and returns the handles (loop names) it mints; after each op the
simplifier folds the guards the bound sizes and loop extents decide. An op that declares a
``BoundSizes`` parameter receives the bound sizes (facts it may use to prove its
preconditions; not one of its recorded arguments).
``s.history`` lists the ops, ``s.save(path)`` writes them as JSON with the final program's
digest, and ``Schedule.load(path, kernel)`` replays them and checks the digest.

A schedule starts from a ``@tc.kernel`` (captured with the config values given) or from a
``Program`` (e.g. one read with ``tc.load``: its config is fixed, so only config values
equal to the program's are accepted). A file is checked against the schema of
``schema.py`` before any op is replayed; an op that fails on replay is reported with its
history index.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Union

import numpy as np

from .. import ir
from ..errors import Loc, SerializationError, TilecertError, UncheckedSizesWarning, caller_loc
from ..expand import expand
from ..inputs import prepare_inputs
from ..jsondata import parse_json
from ..kernel import Kernel
from ..limits import check_seed, check_size
from ..loopinterp import interpret_loops
from ..printer import format_nest, format_program
from ..serialize import digest
from .base import LoopInfo, ScheduleError, loop_infos
from ..transform import Transformed
from .partition import partition_breakpoints
from .registry import OPS
from .schema import HINT, config_fits, schedule_data
from .simplify import simplify

Subject = Union[Kernel, ir.Program]


class Schedule:
    def __init__(self, kernel: Subject, sizes: dict[str, int], config: dict[str, Any]) -> None:
        self.kernel = kernel
        self.sizes = dict(sizes)
        self.config = dict(config)
        self.checks: list[tuple[int, Any]] = []  # (history length, checker report) of each check of this schedule
        self.specification = kernel.capture(**config) if isinstance(kernel, Kernel) else kernel
        """The tile-level program the schedule must keep the meaning of."""
        self.initial = simplify(expand(self.specification), self.sizes)
        self.program = self.initial
        self.history: list[tuple[str, dict[str, Any]]] = []
        self.transforms: list[Transformed] = []
        self.call_sites: list[Loc] = []  # where each op of the history was called (the user's file:line)
        self.programs: list[ir.Program] = [self.initial]  # op k turns programs[k] into programs[k + 1]

    @classmethod
    def create(cls, kernel: Subject, /, **sizes_and_config: Any) -> "Schedule":
        """A schedule of a kernel or a program; the arguments are sizes to bind and config values."""
        if isinstance(kernel, Kernel):
            defaults, size_names = kernel.config_defaults, kernel.size_names
        elif isinstance(kernel, ir.Program):
            defaults, size_names = dict(kernel.config), kernel.sizes
        else:
            raise TilecertError(f"tc.schedule takes a @tc.kernel or a Program, got {type(kernel).__name__}",
                                hint="decorate the function with @tc.kernel")
        config = {k: v for k, v in sizes_and_config.items() if k in defaults}
        sizes = {k: v for k, v in sizes_and_config.items() if k not in config}
        for name, value in sizes.items():
            if name not in size_names:
                raise ScheduleError(f"unknown size or config {name!r} for kernel {kernel.name}",
                                    hint=f"sizes: {list(size_names)}; config: {sorted(defaults)}")
            sizes[name] = check_size(name, value, error=ScheduleError)
        if isinstance(kernel, ir.Program):
            for name, value in config.items():
                if not (config_fits(value, defaults[name]) and value == defaults[name]):
                    raise ScheduleError(f"the program fixes config {name}={defaults[name]!r}, not {value!r}",
                                        hint="schedule the kernel itself to choose other config values")
        return cls(kernel, sizes, config)

    # ------------------------------------------------------------------ ops
    def apply(self, op: str, *args: Any, **kwargs: Any) -> tuple[str, ...]:
        """Apply op ``op`` to its arguments, validated by its declaration (``OpDecl.bind``; the supplied ones are
        the schedule's), record them, and return the loop names it mints."""
        if op not in OPS:
            raise ScheduleError(f"unknown schedule op {op!r}", hint=f"ops: {', '.join(sorted(OPS))}")
        decl = OPS[op]
        params = decl.bind(self.program, args, kwargs, supplied=False)
        facts = {q.name: dict(self.sizes) for q in decl.supplied}
        result = decl.apply(self.program, **params, **facts)
        self.program = simplify(result.program, self.sizes)
        self.history.append((op, params))
        self.call_sites.append(caller_loc())
        self.transforms.append(result)
        self.programs.append(self.program)
        return result.handles

    # ------------------------------------------------------------------ views
    def loops(self) -> list[LoopInfo]:
        """The loop tree, outermost first, with names, extents, kinds and bindings."""
        return list(loop_infos(self.program.body))

    def partition_breakpoints(self, loop: str) -> list[int]:
        """The points inside ``loop``'s range where a guard may flip: breakpoints for ``partition``."""
        return partition_breakpoints(self.program, loop, bound_sizes=self.sizes)

    def loop_tree(self) -> str:
        """The scheduled loop nest with its statements, bound sizes evaluated, each statement's DSL line."""
        return format_nest(self.program, self.sizes)

    def show(self) -> None:
        """Print ``loop_tree()``."""
        print(self.loop_tree())

    def explain(self) -> str:
        """Each op of the history with its tau and the obligations it hands the checker."""
        lines = [f"schedule of {self.kernel.name} sizes={self.sizes} config={self.config}"]
        for k, ((op, params), t) in enumerate(zip(self.history, self.transforms)):
            args = ", ".join(f"{a}={v!r}" for a, v in params.items())
            lines.append(f"{k}. {op}({args}) -> {', '.join(t.handles) or '-'}")
            lines.append(f"   tau: {t.tau}")
            for ob in t.obligations:
                lines.append(f"   obligation {ob}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return format_program(self.program)

    # ------------------------------------------------------------------ storage
    def to_json(self) -> str:
        return json.dumps({"kernel": self.kernel.name, "sizes": self.sizes, "config": self.config,
                           "history": [[op, params] for op, params in self.history],
                           "digest": digest(self.program)}, indent=2)

    def save(self, path: Union[str, Path]) -> None:
        """Write ``to_json`` to the file ``path`` (a str or a Path)."""
        if not isinstance(path, (str, Path)):
            raise SerializationError(f"a schedule file path is a str or a Path, not {type(path).__name__}",
                                     self.program.loc, "e.g. s.save('gemm.schedule.json')")
        try:
            Path(path).write_text(self.to_json())
        except OSError as exc:
            raise SerializationError(f"cannot write schedule file {str(path)!r}: {exc.strerror}",
                                     hint="give the path of a file in an existing, writable folder") from None

    @classmethod
    def from_json(cls, text: str, kernel: Subject, file: str | None = None) -> "Schedule":
        """The schedule ``text`` (``to_json``) describes, replayed on ``kernel`` (a kernel or a program).
        The text is checked against the schema first; ``file`` locates errors (else the caller's line)."""
        data, history = schedule_data(parse_json(text, "schedule file", HINT, file), OPS)
        name = getattr(kernel, "name", None)
        if data["kernel"] != name or not isinstance(kernel, (Kernel, ir.Program)):
            raise SerializationError(f"the schedule is for kernel {data['kernel']!r}, not {name!r}",
                                     hint="load it with the kernel it was made for")
        if isinstance(kernel, Kernel):
            for key, value in data["config"].items():
                if key in kernel.config_defaults and not config_fits(value, kernel.config_defaults[key]):
                    raise SerializationError(f"config {key}={value!r} is not of the type of its default "
                                             f"{kernel.config_defaults[key]!r}", hint=HINT)
        both = sorted(set(data["sizes"]) & set(data["config"]))
        if both:
            raise SerializationError(f"{both[0]!r} is both a size and a config value in the schedule file", hint=HINT)
        try:
            s = cls.create(kernel, **data["sizes"], **data["config"])
        except TilecertError as exc:
            raise SerializationError(f"the sizes and config of the schedule file: {exc.message}",
                                     hint=exc.hint) from exc
        for k, (op, args) in enumerate(history):
            try:
                s.apply(op, **args)
            except TilecertError as exc:
                raise SerializationError(f"history entry {k} ({op}) does not replay: {exc.message}",
                                         hint=exc.hint) from exc
        if data.get("digest") not in (None, digest(s.program)):
            raise SerializationError("the schedule does not replay to the program it was saved with",
                                     hint="the kernel changed since the schedule was saved; re-create the schedule")
        return s

    @classmethod
    def load(cls, path: Union[str, Path], kernel: Subject) -> "Schedule":
        """The schedule saved at ``path`` by ``save``, replayed on ``kernel``."""
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise SerializationError(f"cannot read schedule file {str(path)!r}: {reason}",
                                     hint="give the path of a file written by Schedule.save") from None
        return cls.from_json(text, kernel, str(path))

    def replay(self) -> "Schedule":
        """A fresh schedule with the same history (re-applied op by op)."""
        return Schedule.from_json(self.to_json(), self.kernel)

    # ------------------------------------------------------------------ running
    def run(self, *, order: str = "canonical", seed: int = 0, checked: bool = True,
            **arrays: Any) -> dict[str, np.ndarray]:
        """Interpret the scheduled program (array shapes must agree with the bound sizes)."""
        check_seed(seed, self.program.loc)
        data, sizes = prepare_inputs(self.program, arrays, self.sizes)
        checks = [report for n, report in self.checks if n == len(self.history)]
        if checks and not any(report.covers(sizes) for report in checks):
            warnings.warn(UncheckedSizesWarning(
                f"schedule of {self.kernel.name} runs at sizes {sizes}, which no check of it covered "
                f"({'; '.join(report.scope() for report in checks)}): its verdicts say nothing about this run; "
                "check it at these sizes with s.check(sizes=...)"), stacklevel=2)
        interpret_loops(self.program, sizes, data, order=order, seed=seed, checked=checked)
        return {name: data[name] for name in self.program.outputs}


def install_methods() -> None:
    """Give ``Schedule`` one method per registered op (``OpDecl.method``: its signature and docstring
    come from the op's declaration); an op registered later gets its method from a later call."""
    for name, decl in OPS.items():
        if name in vars(Schedule) and not hasattr(vars(Schedule)[name], "op_name"):
            raise TypeError(f"op {name!r} would replace the Schedule method {name}; register it under another name")
        setattr(Schedule, name, decl.method())
