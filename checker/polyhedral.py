"""The model as isl objects, sizes as isl parameters: the polyhedral view of a program or transform.

- ``domains``: ``{ S<k>[i...] : loop bounds and guards }`` per statement (barriers included);
- ``reads`` / ``writes`` / ``updates``: ``{ S<k>[i...] -> <buffer>[owner coordinates, index] }``
  (an update is an ``Accum``, a read-modify-write with its reducer; a ``Decl`` writes every
  cell of its allocation; a load under an index-condition select only where its branch runs);
- ``schedule``: the sequential execution order, ``S<k>[i...] -> [p_0, i_0, p_1, ..., p_d]``
  (the statement's positions in its blocks interleaved with its loop coordinates, padded
  with zeros): sorting instances by it lists them in program order;
- ``phases``: the same vectors with the coordinate of every loop bound to block / warp /
  lane replaced by 0 (the erased time of ``order.py``): inside one scope instance, two
  instances lie in one barrier phase when no barrier's vector falls between theirs;
- ``tau(c)``: for a transform, ``{ N<k>[x'] -> S<j>[x] : R(x', x) }`` (``correspondence.py``).

Whatever is not quasi-affine is left out and named in ``not_affine`` (the obligations send
it to z3 instead).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import islpy as isl

from tilecert.semantics.solver_names import solver_name

from .correspondence import Correspondence
from .formula import Const, Formula, Term, Var, conj, variables
from .isl_solve import render, render_term
from .model import Access, BufferRec, Inst, Model, Stmt, access_guard, domain, in_bounds, index_terms, inst


@dataclass
class Polyhedral:
    domains: isl.UnionSet
    reads: isl.UnionMap
    writes: isl.UnionMap
    updates: isl.UnionMap
    schedule: isl.UnionMap
    phases: isl.UnionMap
    not_affine: list[str] = field(default_factory=list)


def buffer_space(b: BufferRec) -> str:
    """The isl tuple name of a buffer: its name in the solver namespace, a declared one with its id."""
    name = solver_name(b.name)
    return name if b.decl is None else f"{name}_d{b.decl.id}"


def _text(space: str, coords: list[str], cond: Formula, target: Optional[str] = None,
          terms: tuple[Term, ...] = ()) -> Optional[str]:
    """isl text of ``{ space[coords] (-> target[terms]) : cond }`` (None if not quasi-affine)."""
    body, outs = render(cond), [render_term(t) for t in terms]
    if body is None or any(o is None for o in outs):
        return None
    names: set[str] = set(variables(cond))
    for t in terms:
        names |= variables(t)
    params = sorted(n for n in names if n.startswith("p_"))
    head = f"[{', '.join(params)}] -> " if params else ""
    rng = f" -> {target}[{', '.join(outs)}]" if target is not None else ""
    return f"{head}{{ {space}[{', '.join(coords)}]{rng} : {body} }}"


def _vector(s: Stmt, x: Inst, erased: bool) -> list[Term]:
    """The schedule vector of ``s``: block positions interleaved with loop coordinates."""
    out: list[Term] = []
    k = 0
    for i, pos in enumerate(s.path):
        out.append(Const(pos))
        if i < len(s.path) - 1 and s.containers[i] == "loop":
            out.append(Const(0) if erased and s.loops[k].order == "threads" else x.coord(k))
            k += 1
    return out


def _access(m: Model, x: Inst, acc: Access, dom: Formula) -> tuple[tuple[Term, ...], Formula]:
    """The cell terms of an access and the condition under which the instance makes it."""
    owner = tuple(x.at[lp.var] for lp in acc.buffer.owner_loops)
    cond = conj(dom, access_guard(m, x, acc))
    if acc.index is not None:
        return owner + tuple(index_terms(m, x, acc)), cond
    cells = [Var(f"e{k}") for k in range(len(acc.buffer.shape))]
    return owner + tuple(cells), conj(cond, in_bounds(m, x, cells, acc.buffer))


def polyhedral(m: Model) -> Polyhedral:
    """The isl view of a program's model (bound sizes are constants, the others parameters)."""
    parts: dict[str, list[str]] = {k: [] for k in ("domains", "read", "write", "update", "schedule", "phases")}
    skipped: list[str] = []
    depth = max((2 * len(s.path) for s in m.statements), default=0)
    for s in m.statements:
        x = inst(s, "i")
        coords, space, dom = x.owned(), f"S{s.id}", domain(m, x)
        text = _text(space, coords, dom)
        if text is None:
            skipped.append(f"the domain of `{s.label()}`")
            continue
        parts["domains"].append(text)
        for acc in s.accesses:
            terms, cond = _access(m, x, acc, dom)
            text = _text(space, coords, cond, buffer_space(acc.buffer), terms)
            if text is None:
                skipped.append(f"the {acc.mode} of {acc.buffer.name} in `{s.label()}`")
            else:
                parts[acc.mode].append(text)
        for erased, key in ((False, "schedule"), (True, "phases")):
            vec = _vector(s, x, erased)
            vec += [Const(0)] * (depth - len(vec))
            parts[key].append(_text(space, coords, dom, "", tuple(vec)))
    return Polyhedral(_union_set(parts["domains"]), _union_map(parts["read"]), _union_map(parts["write"]),
                      _union_map(parts["update"]), _union_map(parts["schedule"]), _union_map(parts["phases"]), skipped)


def tau(c: Correspondence) -> tuple[isl.UnionMap, list[str]]:
    """``{ N<k>[x'] -> S<j>[x] : R(x', x) }`` over every new statement with an image, and what was left out."""
    parts, skipped = [], []
    for img in c.images.values():
        xn = inst(img.new, "n")
        xo, rel, _ = c.forward(img, xn, "o")
        text = _text(f"N{img.new.id}", xn.owned(), rel, f"S{img.old.id}", tuple(xo.coords()))
        if text is None:
            skipped.append(f"the image of `{img.new.label()}`")
        else:
            parts.append(text)
    return _union_map(parts), skipped


def _union_set(texts: list[str]) -> isl.UnionSet:
    out = isl.UnionSet("{ }")
    for t in texts:
        out = out.union(isl.UnionSet(t))
    return out


def _union_map(texts: list[str]) -> isl.UnionMap:
    out = isl.UnionMap("{ }")
    for t in texts:
        out = out.union(isl.UnionMap(t))
    return out

