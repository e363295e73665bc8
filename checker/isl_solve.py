"""Decide quasi-affine queries with isl: Presburger arithmetic, exact, any size values.

``render`` writes a formula in isl's set syntax (each operator as ``semantics.affine``
writes it, the one place that knows isl's syntax), or returns None when it is not
quasi-affine (a product of two variables, division by a non-constant, if-then-else).
``first_point`` decides a batch of cases at once: the cases become the named tuples of one
union set ``{ key[vars] : pos }``, the union of the negative parts is subtracted, and the
first non-empty case in the given order yields its lexicographically least point (so a
witness uses the smallest sizes and coordinates). Sizes are ordinary tuple variables, not
isl parameters, which is what makes that least point small.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import islpy as isl

from tilecert.semantics.affine import ISL_CMP, isl_arith, isl_const

from .formula import And, Cmp, Const, Exists, Formula, Ite, Or, Term, Var


def render_term(t: Term) -> Optional[str]:
    if isinstance(t, Var):
        return t.name
    if isinstance(t, Const):
        return isl_const(t.value)
    if isinstance(t, Ite):
        return None
    a, b = render_term(t.a), render_term(t.b)
    if a is None or b is None:
        return None
    return isl_arith(t.op, a, b, *(x.value if isinstance(x, Const) else None for x in (t.a, t.b)))


def render(f: Formula) -> Optional[str]:
    """isl text of ``f`` (None if some part is not quasi-affine)."""
    if isinstance(f, Cmp):
        a, b = render_term(f.a), render_term(f.b)
        return None if a is None or b is None else f"{a} {ISL_CMP[f.op]} {b}"
    if isinstance(f, (And, Or)):
        if not f.parts:
            return "0 = 0" if isinstance(f, And) else "1 = 0"
        parts = [render(p) for p in f.parts]
        if any(p is None for p in parts):
            return None
        return "(" + f" {'and' if isinstance(f, And) else 'or'} ".join(f"({p})" for p in parts) + ")"
    if isinstance(f, Exists):
        body = render(f.body)
        return None if body is None else f"exists ({', '.join(f.names)} : {body})"
    raise TypeError(type(f).__name__)


def _union(entries: Sequence[tuple[int, Sequence[str], str]]) -> isl.UnionSet:
    """The union of ``c<i>[names] : text``: tuples are named by case position, since a case key may hold
    characters isl does not read in a name (a buffer's ``.``)."""
    body = "; ".join(f"c{i}[{', '.join(names)}] : {text}" for i, names, text in entries)
    return isl.UnionSet("{ " + body + " }")


def first_point(cases: Sequence[tuple[str, Sequence[str], str, Optional[str]]]) -> Optional[tuple[str, dict[str, int]]]:
    """For cases ``(key, vars, pos_text, neg_text or None)``: the key of the first case (in order)
    with a point satisfying pos and not neg, with its least point; None if every case is empty."""
    if not cases:
        return None
    result: Union[isl.UnionSet, None] = _union([(i, v, p) for i, (_, v, p, _) in enumerate(cases)])
    negs = [(i, v, n) for i, (_, v, _, n) in enumerate(cases) if n is not None]
    if negs:
        result = result.subtract(_union(negs))
    if result.is_empty():
        return None
    found: dict[str, isl.Set] = {}
    sets = result.get_set_list()
    for i in range(sets.n_set()):
        s = sets.get_at(i)
        found[s.get_tuple_name()] = s
    for i, (key, names, _, _) in enumerate(cases):
        if f"c{i}" in found and not found[f"c{i}"].is_empty():
            point = found[f"c{i}"].lexmin().sample_point()
            return key, {n: point.get_coordinate_val(isl.dim_type.set, i).to_python() for i, n in enumerate(names)}
    raise AssertionError("a non-empty union set with no non-empty case")

