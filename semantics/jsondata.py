"""Reading JSON a user hands us (program, schedule and fuzz case files): typed errors, typed values.

``parse_json(text, what)`` is ``json.loads`` that raises ``SerializationError`` for text that
is not JSON, an object with a duplicate key (the later one would silently win), and nesting
deeper than ``MAX_DEPTH`` (``NaN`` and ``Infinity`` are read as floats: programs hold them).

``conforms(value, tp)`` is the schema check: whether a parsed value has the annotated type
``tp``. Rules: ``int`` is an int in int64 (``INT64``) and never a bool; ``float`` is an
int or float (not a bool); ``bool`` is a bool; ``str`` a str; ``None`` is None;
``list[X]`` / ``tuple[X, ...]`` / ``tuple[X, Y]`` a list or tuple whose items conform;
``dict[K, V]`` a dict whose keys and values conform; a union any of its members; ``Any``
anything; another class an instance of it.
"""
from __future__ import annotations

import json
import types
import typing
from typing import Any

from .errors import Loc, SerializationError

INT64 = (-(2**63), 2**63 - 1)
MAX_DEPTH = 400  # nesting of JSON arrays and objects; real programs stay far below


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise SerializationError(f"duplicate key {key!r} in a JSON object", Loc(),
                                     "each key may appear once per object")
        out[key] = value
    return out


def _depth(value: Any) -> int:
    """The nesting depth of a parsed JSON value (iterative, so any depth is measured)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (list, dict)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (node.values() if isinstance(node, dict) else node))
    return deepest


def parse_json(text: Any, what: str, hint: str, file: str | None = None) -> Any:
    """The value of the JSON ``text`` (a str, bytes or bytearray) holding ``what``; typed errors otherwise.
    Errors are located in ``file`` (at the line of a syntax error) when given, else at the caller's line."""
    def fail(message: str, line: int = 0) -> SerializationError:
        return SerializationError(f"{what}: {message}", None if file is None else Loc(file, line), hint)

    if not isinstance(text, (str, bytes, bytearray)):
        raise fail(f"expected JSON text, got {type(text).__name__}")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except SerializationError as exc:
        raise fail(exc.message) from None
    except RecursionError:
        raise fail("the JSON is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise fail(f"not JSON ({exc.msg}, line {exc.lineno} column {exc.colno})", exc.lineno) from None
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 text ({exc.reason})") from None
    except ValueError as exc:  # e.g. an integer literal beyond the interpreter's digit limit
        raise fail(f"not readable JSON ({exc})") from None
    if _depth(value) > MAX_DEPTH:
        raise fail(f"the JSON is nested more than {MAX_DEPTH} deep")
    return value


def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` has the annotated type ``tp`` (the rules of the module doc)."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            return False
        if not args:
            return True
        if origin is list or (len(args) == 2 and args[1] is Ellipsis):
            return all(conforms(x, args[0]) for x in value)
        return len(args) == len(value) and all(conforms(x, a) for x, a in zip(value, args))
    if origin is dict:
        return isinstance(value, dict) and all(conforms(k, args[0]) and conforms(v, args[1])
                                               for k, v in value.items())
    if tp is Any:
        return True
    if tp is None or tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool) and INT64[0] <= value <= INT64[1]
    if tp is float:
        return isinstance(value, float) or conforms(value, int)
    return isinstance(value, tp) if isinstance(tp, type) else True
