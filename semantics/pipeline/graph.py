"""The stage graph of a pipeline loop: its stages and the dependences between them, from isl on memory effects.

``stage_graph(program, loop, sizes)`` reads the loop form of pipeline loop ``loop`` (``Loop.pipeline`` set, its body
its declarations, then its stage blocks). One pipeline instance is analysed: the loops around the pipeline loop
and the sizes not bound in ``sizes`` are isl parameters (every size >= 0), so what holds holds for every instance
and every size; the pipeline loop's coordinate ``i`` (iteration) and the loops inside it are the instance
coordinates of each statement.

Accesses (one per memory effect of a statement): an ``Assign`` reads the loads of its value and writes its
target cell; an ``Accum`` reads and writes its target cell and reads the loads of its value; a load under a
select on an index condition happens where its branch is taken (under a data-dependent one, always: a may
read). A buffer declared inside the pipeline loop is one storage per pipeline instance, reused by every
iteration (its allocation per iteration is what versions realize): its cells leave out the pipeline coordinate,
so its reuse by a later iteration shows as anti and output edges; its declaration writes every cell (the zero
fill) and counts as a statement of the first stage that accesses the buffer. A buffer declared outside (a carry)
and a tensor are one storage for the whole loop.

Edges, for stages ``p`` (iteration ``i``) and ``c`` (iteration ``i + d``), ``d >= 0`` when ``p < c`` and ``d >= 1``
otherwise (two statements of one stage instance are ordered inside it: no edge):

- ``flow``: a value written by ``p`` at ``i`` is read by ``c`` at ``i + d`` with no write of that cell in between
  (isl's last-writer analysis, ``compute_flow``, on the sequential order). ``distance`` and ``max_distance`` are
  the least and greatest such ``d`` (None: unbounded). A read at ``i + d`` of a cell written at ``i`` and
  overwritten in between makes no flow edge: the overwrite's output edge and its own flow edge order it;
- ``anti`` (a read, then a write) and ``output`` (two writes): the ``d`` where the two can touch one cell
  (``distance`` the least, ``max_distance`` the greatest, None: unbounded).

Over all parameter values: ``distance`` is the least ``d`` for any size and instance. An access (or a loop bound)
that is not quasi-affine may touch every cell at every ``d``: its edges get the least admissible ``d`` and no
bound, and ``StageGraph.notes`` says so (as for a guard that is not quasi-affine, which is dropped: the domain
only grows). ``payload`` is ``value`` for a buffer the program declares, ``effect`` for a tensor;
``materialized`` lists the declared buffers with a flow edge (written in one stage and read in another, or in
the same stage at a later iteration): the only ones that may get versions. A stage's class is ``copy`` when
every statement is an ``Assign`` of a (guarded, converted) tensor load, ``mma`` when it holds an ``Accum`` of a
product of two loads, else ``compute``. Nothing is inserted: ordering two stages invents no barrier.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping, Optional

import islpy as isl

from .. import ir
from .. import loopir as L
from ..affine import to_isl, var_name
from ..index import IExpr, size_names
from ..sched.base import ScheduleError, the_loop
from ..solver_names import solver_name
from .plan import Edge, StageGraph, StageInfo


@dataclass(eq=False)
class _Buffer:
    """A storage the pipeline accesses; ``owners`` are the loops inside the pipeline loop whose coordinates pick
    one allocation of it (a declaration nested in a stage)."""

    name: str
    key: str
    payload: str
    shape: tuple[IExpr, ...]
    owners: tuple[int, ...] = ()


@dataclass(eq=False)
class _Leaf:
    """A statement of the pipeline body: ``loops`` from the pipeline loop inwards, ``guards`` every guard over it
    (the loops around the pipeline loop included), ``schedule`` its sequential-order vector."""

    n: int
    node: object
    stage: Optional[int]
    loops: tuple[L.Loop, ...]
    guards: tuple[IExpr, ...]
    schedule: tuple[str, ...]

    @property
    def space(self) -> str:
        return f"S{self.n}"

    @property
    def dims(self) -> list[str]:
        return [var_name(lp.var, 0) for lp in self.loops]


@dataclass(frozen=True, eq=False)
class _Access:
    leaf: _Leaf
    buffer: _Buffer
    write: bool
    index: Optional[tuple[IExpr, ...]]  # None: every cell (a declaration)
    guards: tuple[tuple[IExpr, bool], ...] = ()


@dataclass
class _Isl:
    """isl text over one pipeline instance: sizes (bound ones fixed) and the outer loops' variables are
    parameters; what is not quasi-affine is noted."""

    sizes: Mapping[str, int]
    outer: tuple[L.Loop, ...]
    params: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    def expr(self, e: IExpr) -> Optional[str]:
        text = to_isl(e)
        if text is not None:
            self.params |= {solver_name(n) for n in size_names(e)}
        return text

    def facts(self) -> list[str]:
        out = [f"{solver_name(n)} = {v}" for n, v in self.sizes.items() if solver_name(n) in self.params]
        return out + [f"{p} >= 0" for p in sorted(self.params) if p.startswith("p_")]

    def domain(self, leaf: _Leaf) -> Optional[list[str]]:
        """The constraints of ``leaf``'s instances (None when a loop bound is not quasi-affine)."""
        conds = []
        for lp in self.outer + leaf.loops:
            start, extent = self.expr(lp.start), self.expr(lp.extent)
            if start is None or extent is None:
                return None
            conds.append(f"{start} <= {var_name(lp.var, 0)} < {start} + {extent}")
        for g in leaf.guards:
            if g == L.IConst(1):
                continue
            text = self.expr(g)
            if text is None:
                self.notes.append(f"the guard `if {g}` is not quasi-affine: dropped (the domain only grows)")
            else:
                conds.append(text)
        return conds

    def head(self) -> str:
        names = sorted(self.params | {var_name(lp.var, 0) for lp in self.outer})
        return f"[{', '.join(names)}] -> " if names else ""

    def access(self, acc: _Access) -> Optional[isl.Map]:
        """``{ S<n>[coords] -> B<k>[owner coordinates, cell] }`` of one access (None if not quasi-affine)."""
        conds = self.domain(acc.leaf)
        if conds is None:
            return None
        cell = [var_name(v, 0) for v in acc.buffer.owners]
        if acc.index is None:
            for j, n in enumerate(acc.buffer.shape):
                extent = self.expr(n)
                if extent is None:
                    return None
                cell.append(f"e{j}")
                conds.append(f"0 <= e{j} < {extent}")
        else:
            for e in acc.index:
                text = self.expr(e)
                if text is None:
                    return None
                cell.append(text)
        for g, taken in acc.guards:
            text = self.expr(g)
            if text is not None:
                conds.append(text if taken else f"not ({text})")
        return isl.Map(self._text(acc.leaf, f"{acc.buffer.key}[{', '.join(cell)}]", conds))

    def order(self, leaf: _Leaf, depth: int) -> isl.Map:
        """The sequential order: ``{ S<n>[coords] -> [i, position, coordinate, ...] }`` padded to ``depth``."""
        vec = list(leaf.schedule) + ["0"] * (depth - len(leaf.schedule))
        return isl.Map(self._text(leaf, f"[{', '.join(vec)}]", self.domain(leaf) or []))

    def iteration(self, leaf: _Leaf) -> isl.Map:
        """``{ S<n>[coords] -> [i] }``: the pipeline iteration of an instance."""
        return isl.Map(self._text(leaf, f"[{leaf.dims[0]}]", []))

    def _text(self, leaf: _Leaf, target: str, conds: list[str]) -> str:
        body = " and ".join(conds + self.facts()) or "0 = 0"
        return f"{self.head()}{{ {leaf.space}[{', '.join(leaf.dims)}] -> {target} : {body} }}"


def the_pipeline_loop(program: ir.Program, loop: str, op: str) -> L.Loop:
    """The loop ``loop`` of ``program``, a pipeline loop (a ``ScheduleError`` naming the pipeline loops otherwise)."""
    lp = the_loop(program, loop, op)
    if lp.pipeline is None:
        raise ScheduleError(f"{op}: loop {loop!r} is a {lp.kind} loop, not a pipeline loop",
                            hint="the loops of tc.pipeline regions: " +
                            (", ".join(q.name for q in L.loops(program.body) if q.pipeline is not None) or "none here"))
    return lp


def stage_graph(program: ir.Program, loop: str, sizes: Optional[Mapping[str, int]] = None) -> StageGraph:
    """The stage graph of pipeline loop ``loop`` of loop-form ``program`` (the rules in the module docstring);
    ``sizes`` binds some sizes (the others stay symbolic)."""
    lp = the_pipeline_loop(program, loop, "stage_graph")
    stray = [st for st in lp.body.ops if not isinstance(st, (L.Decl, L.StageBlock))]
    if stray or not any(isinstance(st, L.StageBlock) for st in lp.body.ops):
        raise ScheduleError(f"stage_graph: the body of pipeline loop {loop!r} is not its declarations and stage "
                            "blocks", hint="take the stage graph before ops that restructure the pipeline body, or "
                            "keep its statements inside the stages")
    outer, guards, scope = _context(program, lp)
    isl_text = _Isl({k: int(v) for k, v in (sizes or {}).items()}, outer)
    accesses = _collect(lp, guards, scope)
    blocks = [st for st in lp.body.ops if isinstance(st, L.StageBlock)]
    stages = tuple(StageInfo(b.ordinal, b.name, _stage_class(b, scope), b.inferred) for b in blocks)
    maps = {id(a): isl_text.access(a) for a in accesses}
    for a in accesses:
        if maps[id(a)] is None:
            isl_text.notes.append(f"the {'write' if a.write else 'read'} of {a.buffer.name} in stage {a.leaf.stage} "
                                  "is not quasi-affine: taken to touch every cell at every distance")
    found: dict[tuple[int, int, str, str], list[Optional[int]]] = {}
    for b in _buffers(accesses):
        mine = [a for a in accesses if a.buffer is b]
        _memory_edges(b, mine, maps, isl_text, found)
        _flow_edges(b, mine, maps, isl_text, found)
    payload = {a.buffer.name: a.buffer.payload for a in accesses}
    edges = tuple(Edge(p, c, lo, payload[buf], buf, dep, hi) for (p, c, buf, dep), (lo, hi) in sorted(found.items()))
    materialized = tuple(sorted({e.buffer for e in edges if e.dep == "flow" and e.payload == "value"}))
    return StageGraph(lp.pipeline.pipeline, lp.name, stages, edges, materialized, lp.extent,
                      tuple(dict.fromkeys(isl_text.notes)))


# ----------------------------------------------------------------------------- the program around the loop
def _context(program: ir.Program, target: L.Loop) -> tuple[tuple[L.Loop, ...], tuple[IExpr, ...], dict[str, _Buffer]]:
    """The loops and guards around ``target`` and the buffers in scope at it (lexically: the nearest ``Decl``)."""
    tensors = {t.name: _Buffer(t.name, f"B{k}", "effect", t.shape) for k, t in enumerate(program.tensors)}

    def walk(block: ir.Block, loops: tuple, guards: tuple, scope: dict) -> Optional[tuple]:
        scope = dict(scope)
        for st in block.ops:
            if st is target:
                return loops, guards, scope
            if isinstance(st, L.Decl):
                scope[st.buf.name] = _Buffer(st.buf.name, f"B{len(tensors)}_{id(st)}", "value", st.buf.shape)
            elif isinstance(st, L.Loop):
                got = walk(st.body, loops + (st,), guards, scope)
                if got is not None:
                    return got
            elif isinstance(st, L.If):
                got = walk(st.body, loops, guards + (st.cond,), scope)
                if got is not None:
                    return got
        return None

    found = walk(program.body, (), (), tensors)
    assert found is not None  # the_loop found it in this body
    return found


def _collect(lp: L.Loop, guards: tuple[IExpr, ...], scope: dict[str, _Buffer]) -> list[_Access]:
    """The accesses of the statements of the pipeline body; a declaration of the body itself goes to the first
    stage that accesses its buffer (dropped when none does)."""
    leaves: list[_Leaf] = []
    accesses: list[_Access] = []
    scope = dict(scope)
    own_decls = []
    i = var_name(lp.var, 0)
    for pos, st in enumerate(lp.body.ops):
        if isinstance(st, L.Decl):
            buf = _Buffer(st.buf.name, f"B{len(scope)}_{id(st)}", "value", st.buf.shape)
            scope[st.buf.name] = buf
            leaf = _Leaf(len(leaves), st, None, (lp,), guards, (i, str(pos)))
            leaves.append(leaf)
            own_decls.append((leaf, buf))
        else:
            _walk(st.body, st.ordinal, (lp,), guards, (i, str(pos)), scope, (), leaves, accesses)
    for leaf, buf in own_decls:
        stages = [a.leaf.stage for a in accesses if a.buffer is buf]
        if stages:
            leaf.stage = min(stages)
            accesses.append(_Access(leaf, buf, True, None))
    return accesses


def _walk(block: ir.Block, stage: int, loops: tuple[L.Loop, ...], guards: tuple[IExpr, ...], schedule: tuple[str, ...],
          scope: dict[str, _Buffer], owners: tuple[int, ...], leaves: list[_Leaf], accesses: list[_Access]) -> None:
    scope = dict(scope)
    for pos, st in enumerate(block.ops):
        here = schedule + (str(pos),)
        if isinstance(st, L.Loop):
            _walk(st.body, stage, loops + (st,), guards, here + (var_name(st.var, 0),), scope, owners + (st.var,),
                  leaves, accesses)
        elif isinstance(st, L.If):
            _walk(st.body, stage, loops, guards + (st.cond,), here, scope, owners, leaves, accesses)
        else:
            leaf = _Leaf(len(leaves), st, stage, loops, guards, here)
            leaves.append(leaf)
            if isinstance(st, L.Decl):
                buf = _Buffer(st.buf.name, f"B{len(scope)}_{id(st)}", "value", st.buf.shape, owners)
                scope[st.buf.name] = buf
                accesses.append(_Access(leaf, buf, True, None))
            elif isinstance(st, (L.Assign, L.Accum)):
                accesses += [_Access(leaf, _named(scope, ld.buf), False, ld.index, g) for ld, g in _loads(st.value, ())]
                if isinstance(st, L.Accum):
                    accesses.append(_Access(leaf, _named(scope, st.buf), False, st.index))
                accesses.append(_Access(leaf, _named(scope, st.buf), True, st.index))


def _named(scope: dict[str, _Buffer], name: str) -> _Buffer:
    if name not in scope:
        raise ScheduleError(f"stage_graph: the pipeline accesses {name!r}, which no tensor or declaration in scope "
                            "names", hint="the loop form is ill-formed there; check the program (tc.check)")
    return scope[name]


def _loads(e: L.SExpr, guards: tuple[tuple[IExpr, bool], ...]) -> Iterator[tuple[L.Ld, tuple[tuple[IExpr, bool], ...]]]:
    """The loads of ``e``, each with the index-condition select branches it lies under."""
    if isinstance(e, L.Sel) and isinstance(e.cond, L.Ix):
        yield from _loads(e.a, guards + ((e.cond.expr, True),))
        yield from _loads(e.b, guards + ((e.cond.expr, False),))
    elif isinstance(e, L.Sel):
        for x in (e.cond, e.a, e.b):
            yield from _loads(x, guards)
    elif isinstance(e, L.Ld):
        yield e, guards
    else:
        for x in (getattr(e, f, None) for f in ("x", "a", "b")):
            if x is not None:
                yield from _loads(x, guards)


def _buffers(accesses: list[_Access]) -> list[_Buffer]:
    return list({id(a.buffer): a.buffer for a in accesses}.values())


# ----------------------------------------------------------------------------- distances
def _lowest(p: int, c: int) -> int:
    """The least distance of an edge from stage ``p`` to stage ``c``: same-iteration edges only go forward."""
    return 0 if p < c else 1


def _note(found: dict, key: tuple[int, int, str, str], lo: int, hi: Optional[int]) -> None:
    if key in found:
        old_lo, old_hi = found[key]
        found[key] = [min(old_lo, lo), None if old_hi is None or hi is None else max(old_hi, hi)]
    else:
        found[key] = [lo, hi]


def _distances(rel: isl.Map, x: _Leaf, y: _Leaf, isl_text: _Isl) -> Optional[tuple[int, Optional[int]]]:
    """The least and greatest ``d`` (None: unbounded) of instance pairs ``rel`` (``S_x -> S_y``) with ``d`` the
    iteration of ``y`` minus that of ``x``, at least the least admissible one, over all parameter values; None if
    there is none."""
    d = rel.apply_domain(isl_text.iteration(x)).apply_range(isl_text.iteration(y)).deltas()
    d = d.intersect(isl.Set(f"{{ [d] : d >= {_lowest(x.stage, y.stage)} }}"))
    d = d.project_out(isl.dim_type.param, 0, d.dim(isl.dim_type.param))
    if d.is_empty():
        return None
    lo = d.lexmin().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python()
    hi = d.lexmax().sample_point().get_coordinate_val(isl.dim_type.set, 0).to_python() if d.is_bounded() else None
    return lo, hi


def _memory_edges(b: _Buffer, mine: list[_Access], maps: dict, isl_text: _Isl, found: dict) -> None:
    """Anti and output edges: the distances at which a read then a write, or two writes, may touch one cell."""
    for x in mine:
        for y in mine:
            if not y.write:
                continue
            key = (x.leaf.stage, y.leaf.stage, b.name, "output" if x.write else "anti")
            mx, my = maps[id(x)], maps[id(y)]
            if mx is None or my is None:
                _note(found, key, _lowest(x.leaf.stage, y.leaf.stage), None)
                continue
            got = _distances(mx.apply_range(my.reverse()), x.leaf, y.leaf, isl_text)
            if got is not None:
                _note(found, key, *got)


def _flow_edges(b: _Buffer, mine: list[_Access], maps: dict, isl_text: _Isl, found: dict) -> None:
    """Flow edges: the last-writer dependences of ``b`` (and every write-read pair one of whose accesses is not
    quasi-affine, unbounded)."""
    reads, writes = [a for a in mine if not a.write], [a for a in mine if a.write]
    for w in writes:
        for r in reads:
            if maps[id(w)] is None or maps[id(r)] is None:
                _note(found, (w.leaf.stage, r.leaf.stage, b.name, "flow"), _lowest(w.leaf.stage, r.leaf.stage), None)
    sink = _union([maps[id(a)] for a in reads])
    source = _union([maps[id(a)] for a in writes])
    if sink.is_empty() or source.is_empty():
        return
    leaves = {a.leaf.space: a.leaf for a in mine}
    depth = max(len(leaf.schedule) for leaf in leaves.values())
    order = _union([isl_text.order(leaf, depth) for leaf in leaves.values()])
    flow = isl.UnionAccessInfo.from_sink(sink).set_must_source(source).set_schedule_map(order).compute_flow()
    deps = flow.get_may_dependence().get_map_list()
    for k in range(deps.n_map()):
        m = deps.get_at(k)
        x, y = leaves[m.get_tuple_name(isl.dim_type.in_)], leaves[m.get_tuple_name(isl.dim_type.out)]
        got = _distances(m, x, y, isl_text)
        if got is not None:
            _note(found, (x.stage, y.stage, b.name, "flow"), *got)


def _union(maps: list[Optional[isl.Map]]) -> isl.UnionMap:
    out = isl.UnionMap("{ }")
    for m in maps:
        if m is not None:
            out = out.union(isl.UnionMap.from_map(m))
    return out


# ----------------------------------------------------------------------------- stage classes
def _stage_class(block: L.StageBlock, scope: dict[str, _Buffer]) -> str:
    """``copy``, ``mma`` or ``compute`` (the rule in the module docstring)."""
    leaves = [st for st in ir.walk(block.body) if not isinstance(st, (L.Loop, L.If))]
    tensors = {n for n, b in scope.items() if b.payload == "effect"}
    if any(isinstance(st, L.Accum) and _product_of_loads(st.value) for st in leaves):
        return "mma"
    if leaves and all(isinstance(st, L.Assign) and _tensor_load(st.value, tensors) for st in leaves):
        return "copy"
    return "compute"


def _tensor_load(e: L.SExpr, tensors: set[str]) -> bool:
    """A load of a tensor, possibly converted, or selected on an index condition against a literal fill."""
    if isinstance(e, L.Cvt):
        return _tensor_load(e.x, tensors)
    if isinstance(e, L.Sel) and isinstance(e.cond, L.Ix):
        return any(_tensor_load(x, tensors) and (isinstance(y, L.Lit) or _tensor_load(y, tensors))
                   for x, y in ((e.a, e.b), (e.b, e.a)))
    return isinstance(e, L.Ld) and e.buf in tensors


def _product_of_loads(e: L.SExpr) -> bool:
    def load(x: L.SExpr) -> bool:
        return isinstance(x, L.Ld) or (isinstance(x, L.Cvt) and load(x.x))
    return isinstance(e, L.Bin) and e.fn == "mul" and load(e.a) and load(e.b)
