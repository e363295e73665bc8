"""The schema of a schedule file (``Schedule.to_json``), checked before anything is replayed.

A schedule file is a JSON object with exactly these fields (``FIELDS``; ``digest`` may be
left out)::

    kernel:  str                     the kernel's (or program's) name
    sizes:   {str: int}              bound sizes, each in [0, 2**63 - 1]
    config:  {str: int|float|bool}   config values, each of its default's type (``config_fits``)
    history: [[op, {arg: value}]]    op a registered op name; each arg one of the op's
                                     parameters, of the type its annotation names
    digest:  str | null              the final program's structural digest

The op signatures are the schema of their arguments: ``split(p, loop: str, factor: int, ...)``
takes ``{"loop": str, "factor": int}`` (``jsondata.conforms``: an int is never a bool and
lies in int64). ``bound_sizes`` is never an argument (the schedule supplies it). Every
violation is a ``SerializationError`` naming the field, or the history entry by its index.
"""
from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable, Optional, Union

from ..errors import SerializationError
from ..jsondata import conforms

FIELDS: dict[str, Any] = {"kernel": str, "sizes": dict[str, int], "config": dict[str, Union[int, float, bool]],
                          "history": list[Any], "digest": Optional[str]}
OPTIONAL = frozenset({"digest"})
HINT = "a schedule file holds kernel, sizes, config, history ([[op, {args}], ...]) and digest (see Schedule.to_json)"


@functools.lru_cache(maxsize=None)
def op_parameters(fn: Callable[..., Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """The recorded parameters of an op with their annotated types, and those without a default."""
    hints = typing.get_type_hints(fn)
    params = list(inspect.signature(fn).parameters.values())[1:]  # the first is the program
    recorded = [q for q in params if q.name != "bound_sizes"]
    return ({q.name: hints.get(q.name, Any) for q in recorded},
            frozenset(q.name for q in recorded if q.default is inspect.Parameter.empty))


def config_fits(value: Any, default: Any) -> bool:
    """A config value replaces ``default``: of its type (an int also fits a float default)."""
    return conforms(value, type(default))


def schedule_data(data: Any, ops: dict[str, Callable[..., Any]]) -> tuple[dict[str, Any], list[tuple[str, dict]]]:
    """``data`` checked against the schema: the top-level fields, and the history as (op, args) pairs."""
    if not isinstance(data, dict):
        raise SerializationError(f"a schedule file holds a JSON object, not {type(data).__name__}", hint=HINT)
    for key in data:
        if key not in FIELDS:
            raise SerializationError(f"unknown field {key!r} in the schedule file", hint=HINT)
    for key, tp in FIELDS.items():
        if key not in data:
            if key in OPTIONAL:
                continue
            raise SerializationError(f"the schedule file has no {key!r} field", hint=HINT)
        if not conforms(data[key], tp):
            raise SerializationError(f"field {key!r} of the schedule file holds {_show(data[key])}, not {_name(tp)}",
                                     hint=HINT)
    for name, value in data["sizes"].items():
        if value < 0:
            raise SerializationError(f"size {name} is {value}; sizes are >= 0", hint=HINT)
    return data, [_entry(k, entry, ops) for k, entry in enumerate(data["history"])]


def _entry(k: int, entry: Any, ops: dict[str, Callable[..., Any]]) -> tuple[str, dict]:
    where = f"history entry {k}"
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict)):
        raise SerializationError(f"{where} is {_show(entry)}, not [op, {{args}}]", hint=HINT)
    op, args = entry
    if not isinstance(op, str) or op not in ops:
        raise SerializationError(f"{where}: unknown schedule op {_show(op)}", hint=f"ops: {', '.join(sorted(ops))}")
    types, required = op_parameters(ops[op])
    signature = f"{op}({', '.join(types)})"
    for name, value in args.items():
        if name not in types:
            raise SerializationError(f"{where}: {op} has no parameter {name!r}", hint=f"signature: {signature}")
        if not conforms(value, types[name]):
            raise SerializationError(f"{where}: {op} argument {name!r} holds {_show(value)}, not {_name(types[name])}",
                                     hint=f"signature: {signature}")
    missing = sorted(required - set(args))
    if missing:
        raise SerializationError(f"{where}: {op} lacks argument {missing[0]!r}", hint=f"signature: {signature}")
    return op, args


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
