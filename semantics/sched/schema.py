"""The schema of a schedule file (``Schedule.to_json``), checked before anything is replayed.

A schedule file is a JSON object with exactly these fields (``FIELDS``; ``digest`` may be
left out)::

    kernel:  str                     the kernel's (or program's) name
    sizes:   {str: int}              bound sizes, each in [0, 2**63 - 1]
    config:  {str: int|float|bool}   config values, each of its default's type (``config_fits``)
    history: [[op, {arg: value}]]    op a registered op name; each arg one of the op's
                                     recorded parameters, matching its declared kind
    digest:  str | null              the final program's structural digest

The op declarations are the schema of their arguments (``op_schema``): ``split``'s kinds
``[LoopName, PosInt, Enum(TAILS), ...]`` give ``{"loop": str, "factor": int in [1, 2**63 - 1],
"tail": "guard" | "partition", ...}`` (``args.matches``: an integer is never a bool).
``bound_sizes`` is never an argument (the schedule supplies it). Every violation is a
``SerializationError`` naming the field, or the history entry by its index and the argument.
What needs the program (a loop name naming a loop) is checked when the entry replays.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Union

from ..errors import SerializationError
from ..jsondata import conforms
from .args import matches, show
from .registry import OpDecl

FIELDS: dict[str, Any] = {"kernel": str, "sizes": dict[str, int], "config": dict[str, Union[int, float, bool]],
                          "history": list[Any], "digest": Optional[str]}
OPTIONAL = frozenset({"digest"})
HINT = "a schedule file holds kernel, sizes, config, history ([[op, {args}], ...]) and digest (see Schedule.to_json)"


def op_schema(decl: OpDecl) -> dict[str, Any]:
    """The JSON Schema of op ``decl``'s arguments in a history entry: an object of its recorded
    parameters, each with its kind's fragment, the required ones listed."""
    return {"type": "object", "additionalProperties": False,
            "properties": {q.name: q.kind.schema() for q in decl.recorded},
            "required": [q.name for q in decl.recorded if q.required]}


def config_fits(value: Any, default: Any) -> bool:
    """A config value replaces ``default``: of its type (an int also fits a float default)."""
    return conforms(value, type(default))


def schedule_data(data: Any, ops: Mapping[str, OpDecl]) -> tuple[dict[str, Any], list[tuple[str, dict]]]:
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
            raise SerializationError(f"field {key!r} of the schedule file holds {show(data[key])}, not {_name(tp)}",
                                     hint=HINT)
    for name, value in data["sizes"].items():
        if value < 0:
            raise SerializationError(f"size {name} is {value}; sizes are >= 0", hint=HINT)
    return data, [_entry(k, entry, ops) for k, entry in enumerate(data["history"])]


def _entry(k: int, entry: Any, ops: Mapping[str, OpDecl]) -> tuple[str, dict]:
    where = f"history entry {k}"
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict)):
        raise SerializationError(f"{where} is {show(entry)}, not [op, {{args}}]", hint=HINT)
    op, args = entry
    if not isinstance(op, str) or op not in ops:
        raise SerializationError(f"{where}: unknown schedule op {show(op)}", hint=f"ops: {', '.join(sorted(ops))}")
    decl = ops[op]
    schema = op_schema(decl)
    signature = f"{op}{decl.signature(decl.recorded)}"
    for name, value in args.items():
        if name not in schema["properties"]:
            raise SerializationError(f"{where}: {op} has no parameter {name!r}", hint=f"signature: {signature}")
        if not matches(value, schema["properties"][name]):
            expected = next(q.kind.expected for q in decl.recorded if q.name == name)
            raise SerializationError(f"{where}: {op} argument {name!r} holds {show(value)}, not {expected}",
                                     hint=f"signature: {signature}")
    missing = [name for name in schema["required"] if name not in args]
    if missing:
        raise SerializationError(f"{where}: {op} lacks argument {missing[0]!r}", hint=f"signature: {signature}")
    return op, args


def _name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) else str(tp).replace("typing.", "")
