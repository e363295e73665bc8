"""The op registry: each schedule op declares its arguments once, ``@schedule_op(name, [kinds...])``.

The kinds (``args.py``) match the op function's parameters after the program, in order; the
defaults are the function's. From the one declaration come the validation of every call (a
direct call of the op function included) and its error text, the ``Schedule`` method with its
signature and docstring (``method``), the schema of a schedule file's history entries
(``schema.py``) and the hypothesis strategies (``tilecert.strategies.op_calls``). ``OPS`` maps
each op name to its ``OpDecl``; an op module registers by being imported (``sched/__init__.py``).
"""
from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from .. import ir
from .args import Kind, Site
from .base import ScheduleError
from ..pipeline.stages import check_stage_structure
from ..transform import Transformed

REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One declared parameter: its name, kind and default (``REQUIRED`` when it has none)."""

    name: str
    kind: Kind
    default: Any = REQUIRED
    keyword_only: bool = False

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class OpDecl:
    """A registered op: ``fn(program, **args)`` is its rewrite, ``params`` its declared parameters."""

    name: str
    fn: Callable[..., Transformed]
    params: tuple[Param, ...]
    returns: Optional[Callable[[Transformed], Any]] = None
    """What the ``Schedule`` method returns of the op's result (None: the handles it mints)."""

    @property
    def recorded(self) -> tuple[Param, ...]:
        """The parameters a caller gives and a history records (not the supplied ones)."""
        return tuple(q for q in self.params if not q.kind.supplied)

    @property
    def supplied(self) -> tuple[Param, ...]:
        return tuple(q for q in self.params if q.kind.supplied)

    def signature(self, params: Sequence[Param] | None = None) -> inspect.Signature:
        """``(loop: str, factor: int, tail: str = 'guard', ...)``: the parameters (all by default) with the
        Python types of their kinds."""
        kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return inspect.Signature([inspect.Parameter(q.name, kinds[0] if q.keyword_only else kinds[1],
                                                    default=q.default, annotation=q.kind.annotation)
                                  for q in (self.params if params is None else params)])

    @property
    def doc(self) -> str:
        """The op's docstrings (its function's, then its module's: formula and legality) and its declared
        arguments."""
        docs = [inspect.getdoc(self.fn), inspect.getdoc(inspect.getmodule(self.fn))]
        fn_doc = "\n\n".join(d for d in docs if d)
        lines = [f"    {q.name}: {q.kind.expected}" + ("" if q.required else f" (default {q.default!r})")
                 for q in self.recorded]
        returns = "Returns the loop names the op mints (one name, or a tuple of them)." if self.returns is None \
            else "The loops it mints show in ``loops()``."
        return f"{fn_doc}\n\nArguments:\n" + "\n".join(lines) + "\n\n" + returns

    def bind(self, program: ir.Program, args: Sequence[Any], kwargs: dict[str, Any],
             supplied: bool = True) -> dict[str, Any]:
        """The arguments given (positional and keyword), each validated by its kind and normalized;
        ``supplied=False`` refuses a value for a supplied parameter (a ``Schedule`` gives those)."""
        try:
            bound = self.signature().bind(*args, **kwargs)
        except TypeError as exc:
            raise ScheduleError(f"{self.name}: {exc}",
                                hint=f"signature: {self.name}{self.signature(self.recorded)}") from None
        out: dict[str, Any] = {}
        for q in self.params:
            if q.name not in bound.arguments:
                continue
            if q.kind.supplied and not supplied:
                raise ScheduleError(f"{self.name}: {q.name} come from the schedule", hint=q.kind.hint(
                    Site(self.name, q.name, program)))
            out[q.name] = q.kind.validate(bound.arguments[q.name], Site(self.name, q.name, program, dict(out)))
        return out

    def __call__(self, program: ir.Program, *args: Any, **kwargs: Any) -> Transformed:
        """The op applied to ``program`` with validated arguments."""
        return self.apply(program, **self.bind(program, args, kwargs))

    def apply(self, program: ir.Program, **args: Any) -> Transformed:
        """``fn(program, **args)`` (arguments already validated), refused when its result breaks the stage structure
        (``pipeline.stages.check_stage_structure``) of a program that had it well formed: every op keeps a pipeline
        loop's body ``[Decl..., StageBlock 0 .. S-1]`` or does not apply."""
        result = self.fn(program, **args)
        broken = check_stage_structure(result.program)
        if broken and not check_stage_structure(program):
            raise ScheduleError(f"{self.name}: the result would break a pipeline's stage structure: {broken[0]}",
                                hint="a pipeline loop's body is its declarations, then its stage blocks in order: "
                                     "schedule the loops inside a stage or around the pipeline loop (split, pad, "
                                     "partition, bind and unroll of the pipeline loop keep its stages)")
        return result

    def method(self) -> Callable[..., Union[str, tuple[str, ...]]]:
        """The ``Schedule`` method of this op: it applies the op and returns the handles it mints."""
        name, returns = self.name, self.returns

        def method(schedule: Any, *args: Any, **kwargs: Any) -> Union[str, tuple[str, ...]]:
            handles = schedule.apply(name, *args, **kwargs)
            if returns is not None:
                return returns(schedule.transforms[-1])
            return handles if len(handles) != 1 else handles[0]

        method.__name__, method.__qualname__, method.__doc__ = name, f"Schedule.{name}", self.doc
        method.__module__ = self.fn.__module__
        method.op_name = name  # type: ignore[attr-defined]  # marks an op method (install_methods)
        own = self.signature(self.recorded)
        method.__signature__ = own.replace(  # type: ignore[attr-defined]
            parameters=[inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *own.parameters.values()],
            return_annotation=Union[str, tuple[str, ...]])
        return method


OPS: dict[str, OpDecl] = {}


def schedule_op(name: str, kinds: Sequence[Kind], returns: Optional[Callable[[Transformed], Any]] = None,
                ) -> Callable[[Callable[..., Transformed]], Callable[..., Transformed]]:
    """Register the decorated function ``fn(program, ...)`` as op ``name`` whose parameters after the
    program have the argument kinds ``kinds``, in order; ``returns`` picks what the ``Schedule`` method
    returns of the result (default: the handles). The decorated function validates its arguments."""
    def register(fn: Callable[..., Transformed]) -> Callable[..., Transformed]:
        params = list(inspect.signature(fn).parameters.values())[1:]
        if len(params) != len(kinds) or any(q.kind in (q.VAR_POSITIONAL, q.VAR_KEYWORD) for q in params):
            raise TypeError(f"op {name}: {len(kinds)} argument kinds declared for parameters "
                            f"{[q.name for q in params]}")
        decl = OpDecl(name, fn, tuple(Param(q.name, k, q.default, q.kind is q.KEYWORD_ONLY)
                                      for q, k in zip(params, kinds)), returns)
        if any(q.kind.supplied and not q.keyword_only for q in decl.params):
            raise TypeError(f"op {name}: a supplied parameter is keyword-only")
        OPS[name] = decl

        @functools.wraps(fn)
        def validated(program: ir.Program, *args: Any, **kwargs: Any) -> Transformed:
            return decl(program, *args, **kwargs)

        return validated

    return register
