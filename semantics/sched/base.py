"""What every schedule op shares: loop-tree surgery, argument checks and copies of loop bodies.

The contract an op fulfils (``Transformed``: program, tau, obligations, datamaps) is
``semantics/transform.py``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterator, Optional

from .. import ir
from .. import loopir as L
from ..affine import Context
from ..bindings import HARDWARE_INDICES
from ..errors import TilecertError
from ..index import IConst, IExpr, IVar, conj, substitute_many
from ..mapper import Mapper
from ..pipeline.stages import guarded
from ..transform import Piece, Renamed

class ScheduleError(TilecertError):
    """A schedule op's precondition does not hold (the message says what and how to fix it)."""


# ----------------------------------------------------------------------------- the loop tree
@dataclass(frozen=True)
class LoopInfo:
    name: str
    var: int
    extent: IExpr
    kind: str
    binding: Optional[str]
    depth: int
    parent: Optional[str]

    def __str__(self) -> str:
        bind = f" bind={self.binding}" if self.binding else ""
        return f"{'  ' * self.depth}{self.kind} {self.name} [{self.extent}]{bind}"


def loop_infos(block: ir.Block, depth: int = 0, parent: Optional[str] = None) -> Iterator[LoopInfo]:
    for st in block.ops:
        if isinstance(st, L.Loop):
            yield LoopInfo(st.name, st.var, st.extent, st.kind, st.binding, depth, parent)
            yield from loop_infos(st.body, depth + 1, st.name)
        elif isinstance(st, L.If):
            yield from loop_infos(st.body, depth, parent)


def find_loops(block: ir.Block, name: str) -> list[L.Loop]:
    return [lp for lp in L.loops(block) if lp.name == name]


def the_loop(p: ir.Program, name: str, op: str) -> L.Loop:
    """The unique loop called ``name`` (a ``ScheduleError`` naming the loops otherwise)."""
    found = find_loops(p.body, name)
    if not found:
        names = ", ".join(lp.name for lp in L.loops(p.body))
        raise ScheduleError(f"{op}: no loop named {name!r}", hint=f"loops are: {names}")
    if len(found) > 1:
        raise ScheduleError(f"{op}: {len(found)} loops are named {name!r}", hint="address one copy by its own name")
    return found[0]


def replace_loop(block: ir.Block, target: L.Loop, new: list) -> ir.Block:
    """``block`` with the statement ``target`` (by identity) replaced by the statements ``new``."""
    return _Replace(target, new).map_block(block)


class _Replace(Mapper):
    def __init__(self, target: L.Loop, new: list) -> None:
        self.target, self.new = target, new

    def map_stmt(self, st: Any) -> Any:
        if st is self.target:
            return list(self.new)
        return super().map_stmt(st) if isinstance(st, (L.Loop, L.If)) else st


def with_body(p: ir.Program, body: ir.Block) -> ir.Program:
    return dataclasses.replace(p, body=body)


def fresh_name(p: ir.Program, base: str, taken: set[str] | None = None) -> str:
    names = {lp.name for lp in L.loops(p.body)} | (taken or set())
    if base not in names:
        return base
    k = 1
    while f"{base}{k}" in names:
        k += 1
    return f"{base}{k}"


def statement_names(st: Any) -> set[str]:
    """The names a statement answers to, as ``s.show()`` prints them: a loop its name, a store or update
    the buffer it writes, a guard the names of what it holds (a declaration or barrier none)."""
    if isinstance(st, L.Loop):
        return {st.name}
    if isinstance(st, (L.Assign, L.Accum)):
        return {st.buf}
    if isinstance(st, L.If):
        return set().union(*(statement_names(inner) for inner in st.body.ops))
    return set()


def named_positions(block: ir.Block, name: str) -> list[int]:
    """The positions of the statements directly in ``block`` that answer to ``name`` (``statement_names``)."""
    return [k for k, st in enumerate(block.ops) if name in statement_names(st)]


def touched(st: Any) -> set[str]:
    """The buffer names statement ``st`` (with everything nested in it) declares, loads, stores or updates."""
    names: set[str] = set()
    for node in ir.walk(ir.Block((), (st,))):
        if isinstance(node, L.Decl):
            names.add(node.buf.name)
        elif isinstance(node, (L.Assign, L.Accum)):
            names.add(node.buf)
            names.update(ld.buf for ld in L.loads(node.value))
    return names


# ----------------------------------------------------------------------------- arguments and diagnostics
def names_arg(value: Any, what: str, op: str) -> tuple[str, ...]:
    """``value`` as a non-empty tuple of distinct loop names (a list or tuple of str)."""
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(n, str) for n in value):
        raise ScheduleError(f"{op}: {what} must be a non-empty list of loop names, got {value!r}",
                            hint=f"pass {what} as a list of str, e.g. ['i', 'j']")
    repeated = sorted({n for n in value if list(value).count(n) > 1})
    if repeated:
        raise ScheduleError(f"{op}: {what} names {', '.join(map(repr, repeated))} more than once",
                            hint="name each loop once")
    return tuple(value)


def describe(st: Any) -> str:
    """A short readable description of a loop-form statement."""
    if isinstance(st, L.Loop):
        return f"loop {st.name!r}"
    if isinstance(st, L.StageBlock):
        return f"stage {st.ordinal} ({st.name})"
    if isinstance(st, L.If):
        return f"a guard `if {st.cond}`"
    if isinstance(st, L.Decl):
        return f"the declaration of {st.buf.name}"
    if isinstance(st, L.Assign):
        return f"a store to {st.buf}"
    if isinstance(st, L.Accum):
        return f"an {st.op}-update of {st.buf}"
    if isinstance(st, L.Barrier):
        return f"a {st.scope} barrier"
    return type(st).__name__


def describe_all(sts: list, limit: int = 5) -> str:
    """``describe`` of each statement, joined; past ``limit`` the rest are counted."""
    parts = [describe(st) for st in sts[:limit]]
    if len(sts) > limit:
        parts.append(f"{len(sts) - limit} more statement(s)")
    return ", ".join(parts)


# ----------------------------------------------------------------------------- perfectly nested bands
def _contains(st: Any, target: L.Loop) -> bool:
    return st is target or any(lp is target for lp in L.loops(ir.Block((), (st,))))


@dataclass(frozen=True)
class Band:
    """Loops each of whose body is exactly the next loop, possibly under guards (outermost first)."""

    loops: tuple[L.Loop, ...]
    guards: tuple[L.If, ...]

    def inner_body(self) -> ir.Block:
        """The innermost body with the band's guards sunk onto it: ``if c { for x { S } }`` runs
        exactly what ``for x { if c { S } }`` runs, since ``c`` does not read ``x`` and a loop
        header has no effect."""
        body = self.loops[-1].body
        if not self.guards:
            return body
        cond: IExpr = IConst(1)
        for g in self.guards:
            cond = conj(cond, g.cond)
        return guarded(body, cond, self.guards[0].loc)


def band(p: ir.Program, names: tuple[str, ...], op: str) -> Band:
    """The loops ``names`` as a perfectly nested band in nest order, outermost first (a
    ``ScheduleError`` naming what lies between two of them otherwise)."""
    loops = [the_loop(p, n, op) for n in names]
    for a in loops:
        for b in loops:
            if a is not b and not _contains(a, b) and not _contains(b, a):
                raise ScheduleError(f"{op}: loops {a.name!r} and {b.name!r} are not nested in one another",
                                    hint="name loops of one nest, each directly inside the previous one")

    def outermost(group: list[L.Loop]) -> L.Loop:
        return next(lp for lp in group if all(_contains(lp, o) for o in group))

    rest = list(loops)
    chain, guards = [outermost(rest)], []
    rest.remove(chain[0])
    while rest:
        cur, nxt = chain[-1], outermost(rest)
        sts = cur.body.ops
        while len(sts) == 1 and isinstance(sts[0], L.If) and not isinstance(sts[0], L.StageBlock):
            guards.append(sts[0])
            sts = sts[0].body.ops
        if len(sts) == 1 and sts[0] is nxt:
            chain.append(nxt)
            rest.remove(nxt)
            continue
        on_path = next(st for st in sts if _contains(st, nxt))
        others = [st for st in sts if st is not on_path]
        if others:
            raise ScheduleError(f"{op}: loop {nxt.name!r} is not perfectly nested in {cur.name!r}: the body also "
                                f"contains {describe_all(others)}",
                                hint="this op needs a perfect band (each loop's body exactly the next loop, guards "
                                     "allowed); choose loops whose bodies hold nothing else")
        raise ScheduleError(f"{op}: loop {nxt.name!r} is not directly nested in {cur.name!r}: "
                            f"{describe(on_path)} lies between them",
                            hint="include the loops between them, or name adjacent loops")
    return Band(tuple(chain), tuple(guards))


# ----------------------------------------------------------------------------- proofs and tau composition
def enclosing(block: ir.Block, target: Any) -> Optional[list]:
    """The loops and guards around statement ``target``, outermost first (None if it is not in ``block``)."""
    for st in block.ops:
        if st is target:
            return []
        body = getattr(st, "body", None)
        if isinstance(body, ir.Block):
            path = enclosing(body, target)
            if path is not None:
                return [st] + path
    return None


def proves(p: ir.Program, target: Any, cond: IExpr, sizes: Optional[dict[str, int]]) -> bool:
    """Whether ``cond`` holds wherever ``target`` runs: constant-folded, or decided by isl from the
    loops and guards around ``target`` and the bound ``sizes`` (False when undecided)."""
    return context_at(p, target, sizes).decide(cond) is True


def context_at(p: ir.Program, target: Any, sizes: Optional[dict[str, int]]) -> Context:
    """The isl context where ``target`` runs: the loops and guards around it and the bound ``sizes``."""
    ctx = Context(dict(sizes or {}))
    for st in enclosing(p.body, target) or []:
        ctx = ctx.with_loop(st.var, st.start, st.extent) if isinstance(st, L.Loop) else ctx.with_fact(st.cond)
    return ctx


# ----------------------------------------------------------------------------- building loops
def loop_name(p: ir.Program, given: Any, default: str, op: str, freed: tuple[str, ...] = (),
              taken: set[str] | None = None) -> str:
    """The name of a new loop: ``given`` (a str no loop keeps, other than the ``freed`` ones the op
    removes) or, when None, a fresh name built from ``default``."""
    if given is None:
        return fresh_name(p, default, taken)
    if not isinstance(given, str) or not given:
        raise ScheduleError(f"{op}: a loop name must be a non-empty str, got {given!r}",
                            hint="pass a str, or leave the name out for a generated one")
    if given in ({lp.name for lp in L.loops(p.body)} - set(freed)) | (taken or set()):
        raise ScheduleError(f"{op}: a loop named {given!r} exists already",
                            hint="pass a fresh name, or leave the name out for a generated one")
    return given


def nest(loops: list[L.Loop], body: ir.Block) -> L.Loop:
    """The loop headers ``loops`` nested outermost first around ``body`` (their own bodies are dropped)."""
    for lp in reversed(loops[1:]):
        body = ir.Block((), (dataclasses.replace(lp, body=body),))
    return dataclasses.replace(loops[0], body=body)


# ----------------------------------------------------------------------------- bindings and copies


def hardware_bound(lp: L.Loop) -> bool:
    """Whether ``lp`` is bound to a hardware index (grid / block slot, warp, lane)."""
    return L.binding_kind(lp.binding) in HARDWARE_INDICES


def buffer_names(p: ir.Program) -> set[str]:
    """Every buffer name of ``p``: its tensors and the buffers its body declares."""
    return {t.name for t in p.tensors} | {st.buf.name for st in ir.walk(p.body) if isinstance(st, L.Decl)}


def buffer_type(p: ir.Program, name: str, op: str) -> tuple[str, tuple[IExpr, ...]]:
    """The dtype and shape of buffer ``name``: a tensor of ``p`` or a buffer its body declares."""
    types = {(t.dtype, t.shape) for t in p.tensors if t.name == name}
    types |= {(st.buf.dtype, st.buf.shape) for st in ir.walk(p.body) if isinstance(st, L.Decl) and st.buf.name == name}
    if not types:
        raise ScheduleError(f"{op}: no buffer named {name!r}",
                            hint=f"buffers are: {', '.join(sorted(buffer_names(p)))}")
    if len(types) > 1:
        shapes = {shape for _, shape in types}
        what = "shapes" if len(shapes) > 1 else "dtypes"
        raise ScheduleError(f"{op}: {name!r} is declared with {len(types)} different {what}",
                            hint="name one buffer of one dtype and shape")
    return types.pop()


def the_decl(p: ir.Program, name: str, op: str) -> tuple[L.Decl, list]:
    """The one declaration of buffer ``name`` and the loops and guards around it, outermost first (a
    ``ScheduleError`` when ``name`` is a tensor, undeclared or declared more than once)."""
    decls = [st for st in ir.walk(p.body) if isinstance(st, L.Decl) and st.buf.name == name]
    if any(t.name == name for t in p.tensors) or len(decls) != 1:
        what = "a tensor" if any(t.name == name for t in p.tensors) else f"declared {len(decls)} times"
        declared = sorted({st.buf.name for st in ir.walk(p.body) if isinstance(st, L.Decl)})
        raise ScheduleError(f"{op}: {name!r} is {what}, not one declared buffer",
                            hint=f"name a buffer the body declares once: {', '.join(declared) or 'none'}")
    return decls[0], enclosing(p.body, decls[0]) or []


def fresh_buffer(base: str, taken: set[str]) -> str:
    """A buffer name built from ``base`` that is not in ``taken``; it is added to ``taken``."""
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


@dataclass(frozen=True)
class Copy:
    """One copy of a loop body: the block, and for each loop inside the original body the variable
    and name of its counterpart in the copy (in nest order)."""

    body: ir.Block
    loops: tuple[tuple[int, int, str], ...]  # (old variable, new variable, new name)

    def piece(self, var: int, value: IExpr) -> Piece:
        """The piece of tau this copy performs, with the copied loop's ``var`` at ``value``."""
        return Piece(((var, value),) + tuple((old, IVar(new, 0)) for old, new, _ in self.loops))


class Copier:
    """Copies of loop bodies that sit side by side in one program (materializing unroll, partition).

    Each copy substitutes a value for the copied loop's variable; every loop inside gets a fresh
    variable and the name ``<name>.<tag>`` (made unique), and every buffer declared inside a
    fresh name ``<buffer>_<tag>``, so each copy stays addressable and declares its own buffers;
    ``renamed`` declares each such buffer (``transform.Renamed``).
    """

    def __init__(self, p: ir.Program) -> None:
        self.p = p
        self.new_var = L.fresh_var(p)
        self.loop_names = {lp.name for lp in L.loops(p.body)}
        self.buffers = buffer_names(p)
        self.renamed: list[Renamed] = []

    def loop_name(self, base: str) -> str:
        """A loop name built from ``base`` that no loop of the program or of an earlier copy has."""
        name = fresh_name(self.p, base, self.loop_names)
        self.loop_names.add(name)
        return name

    def copy(self, body: ir.Block, var: int, value: IExpr, tag: str) -> Copy:
        inner = list(L.loops(body))
        new = {lp.var: (self.new_var(), self.loop_name(f"{lp.name}.{tag}")) for lp in inner}
        bufs = {st.buf.name: fresh_buffer(f"{st.buf.name}_{tag}", self.buffers)
                for st in ir.walk(body) if isinstance(st, L.Decl)}
        self.renamed += [Renamed(new, old) for old, new in bufs.items()]
        values = {var: value, **{old: IVar(v, 0) for old, (v, _) in new.items()}}
        return Copy(_Copied(values, new, bufs).map_block(body), tuple((lp.var, *new[lp.var]) for lp in inner))


class _Copied(Mapper):
    """One copy of a loop body: ``values`` substituted in every index expression, each loop given its
    new variable and name, each declared buffer its new name; every node is rebuilt, even an unchanged
    one, so that the copies side by side share no statement (datamaps name statements by identity)."""

    def __init__(self, values: dict[int, IExpr], loops: dict[int, tuple[int, str]], bufs: dict[str, str]) -> None:
        self.values, self.loops, self.bufs = values, loops, bufs

    def map_iexpr(self, e: IExpr) -> IExpr:
        return substitute_many(e, self.values)

    def rebuilt(self, node: Any, **fields: Any) -> Any:
        if isinstance(node, L.Loop):
            fields["var"], fields["name"] = self.loops[node.var]
        elif isinstance(node, L.Buffer):
            fields["name"] = self.bufs.get(node.name, node.name)
        elif isinstance(node, (L.Ld, L.Assign, L.Accum)):
            fields["buf"] = self.bufs.get(node.buf, node.buf)
        return dataclasses.replace(node, **fields)
