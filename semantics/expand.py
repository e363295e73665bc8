"""Library expansion: tile program -> loop form (an IR -> IR pass).

Each tile value becomes a buffer owned by the instance of its nearest enclosing parallel
loop (declared where the value is defined); each tile op becomes a loop nest of scalar
statements over its result's dims:

- elementwise ops, casts, selects, fills, iotas, reshapes: parallel loops, one ``Assign``;
- ``reduce`` / ``mma``: parallel loops over the kept dims around reduce loops over the
  reduced (contracted) dims, one ``Accum`` whose policy is the op's;
- view loads: guarded copies (``Sel`` on the in-bounds predicate under ``zero``; under
  ``assume`` a plain copy); view stores: copies under an ``If`` on the in-bounds predicate;
- regions: one loop per domain axis, named ``<loop variable>.<axis>``; carried state lives
  in buffers written back at the end of each iteration (through temporaries when a
  yield reads another carry, so all carries update at once); a reduce region whose
  update is a recognised merge (``s = s + e``, ``mma(a, b, s)``, ...) becomes ``Accum``
  updates under reduce loops, any other fold region a serial loop (reversed for
  ``fold_right``); a tree-policy region without a known merge is refused, as the interpreter
  refuses it (``tree_merges``).

Names come from the DSL, never from a counter over the program, so expanding one part of a
kernel differently renames nothing elsewhere: a value's buffer is named after the variable
first bound to it (``acc``; else its op, ``add``, ``load``), a memory after its variable; the
loops of an op's nest are ``<buffer written>.<op>.<dim>`` (``acc.mma.K``, ``C.store.N``,
``a.load.M``). A name already taken (a tensor, another buffer or loop) gets the smallest
number that frees it: ``acc``, ``acc1``, ...; a loop prefix (``nest``, ``acc.mma``) is numbered
as a whole (``nest1.0``).

Every tile op of the DSL is anchored at its innermost enclosing parallel instance (capture
rejects collective updates of ancestor values), so each op's distribution over its
frontier's participants is the identity map.
"""
from __future__ import annotations

import itertools
from typing import Optional
from . import ir
from . import loopir as L
from .errors import CaptureError
from .index import IBin, IConst, IExpr, INot, IVar, ibin
from .reduction import classify_updates, tree_merges
from .names import numbered
from .ufuncs import identity
from .dtypes import dtype_of
from .bindings import region_bindings
from .pipeline.stages import stage_groups


def _and(a: IExpr, b: IExpr) -> IExpr:
    if a == IConst(1):
        return b
    return ibin("and", a, b)


def in_bounds(index: tuple[IExpr, ...], shape: tuple[IExpr, ...]) -> IExpr:
    cond: IExpr = IConst(1)
    for i, n in zip(index, shape):
        cond = _and(cond, ibin("and", ibin("ge", i, IConst(0)), ibin("lt", i, n)))
    return cond


class Expander:
    def __init__(self, p: ir.Program) -> None:
        self.p = p
        self.types: dict[int, ir.TileType] = {}
        for op in ir.walk(p.body):
            for v in ir.results_of(op):
                self.types[v.id] = v.type
            body = getattr(op, "body", None)
            if body is not None:
                for v in body.args:
                    self.types[v.id] = v.type
        self.bufs: dict[int, str] = {}
        self.mems: dict[int, str] = {}
        self.vars: dict[tuple[int, int], IExpr] = {}
        self.labels: dict[int, str] = {}  # value id -> the name its buffer takes
        for op in ir.walk(p.body):
            for v in ir.results_of(op):
                self.labels[v.id] = ir.value_name(op, v)
            body = getattr(op, "body", None)
            if body is not None:
                for v in body.args:
                    self.labels[v.id] = v.label or "carry"
        self.var_ids = itertools.count()
        self.names: set[str] = {t.name for t in p.tensors}
        self.accum_yields: dict[int, tuple[str, int, str]] = {}  # yield -> (carry buffer, arg, policy)
        self.words: list[str] = []  # the DSL bindings of the enclosing bound parallel regions, outermost first

    # ------------------------------------------------------------------ helpers
    def _taken(self, name: str, prefix: bool) -> bool:
        if name in self.names:
            return True
        return prefix and any(n.startswith(name + ".") for n in self.names)

    def fresh(self, base: str, prefix: bool = False) -> str:
        """``base`` made unique (``names.numbered``; as a prefix, no name ``<it>.*`` may exist either),
        reserved."""
        name = numbered(base, lambda n: self._taken(n, prefix))
        self.names.add(name)
        return name

    def sub(self, e: IExpr) -> IExpr:
        """Rewrite region coordinates into loop variables."""
        if isinstance(e, IVar):
            return self.vars[(e.region, e.axis)]
        if isinstance(e, IBin):
            return ibin(e.op, self.sub(e.a), self.sub(e.b))
        if isinstance(e, INot):
            return INot(self.sub(e.a))
        return e

    def shape(self, t: ir.TileType) -> tuple[IExpr, ...]:
        return tuple(self.sub(s) for s in t.shape)

    def decl(self, vid: int, scope: str = "local") -> tuple[list, str]:
        t = self.types[vid]
        name = self.fresh(self.labels[vid])
        self.bufs[vid] = name
        return [L.Decl(L.Buffer(name, t.dtype, self.shape(t), scope))], name

    def nest(self, label: str, extents: tuple[IExpr, ...], names: tuple[str, ...], kinds: tuple[str, ...],
             loc) -> tuple[list, tuple[IExpr, ...]]:
        """Build loops ``<label>.<name>`` (outermost first) around ``body``; returns (stmts, loop variables).
        ``label`` is ``<buffer written>.<op>``, numbered as a whole when taken."""
        ids = [next(self.var_ids) for _ in extents]
        vs = tuple(IVar(i, 0) for i in ids)
        label = self.fresh(label, prefix=True)
        return (lambda stmts: self._wrap(label, extents, names, kinds, ids, stmts, loc)), vs

    def _wrap(self, label, extents, names, kinds, ids, stmts, loc) -> list:
        for ext, nm, kind, vid in reversed(list(zip(extents, names, kinds, ids))):
            stmts = [L.Loop(vid, self.fresh(f"{label}.{nm}"), ext, kind, ir.Block((), tuple(stmts)), None,
                            IConst(0), loc)]
        return stmts

    def load(self, vid: int, index: tuple[IExpr, ...]) -> L.Ld:
        return L.Ld(self.bufs[vid], index, self.types[vid].dtype)

    def operand_index(self, vid: int, result: ir.TileType, vs: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        """Index of operand ``vid`` inside a loop nest over ``result``'s dims (broadcasting)."""
        t = self.types[vid]
        idx = []
        for d, s in zip(t.dims, t.shape):
            j = result.dims.index(d)
            unit_here = s == IConst(1) and result.shape[j] != IConst(1)
            idx.append(IConst(0) if unit_here else vs[j])
        return tuple(idx)

    def elementwise(self, out: ir.Value, label: str, make_value, loc) -> list:
        """``out[q] = make_value(q)`` over out's dims (parallel loops)."""
        stmts, buf = self.decl(out.id)
        t = out.type
        wrap, vs = self.nest(f"{buf}.{label}", self.shape(t), tuple(str(d) for d in t.dims),
                             ("parallel",) * t.rank, loc)
        return stmts + wrap([L.Assign(buf, vs, make_value(vs), loc)])

    # ------------------------------------------------------------------ program
    def program(self) -> ir.Program:
        body = self.block(self.p.body, {})
        return ir.Program(self.p.name, self.p.sizes, self.p.tensors, ir.Block((), tuple(body)), self.p.config,
                          self.p.loc)

    def block(self, block: ir.Block, arg_bufs: dict[int, str]) -> list:
        for v in block.args:
            if v.id in arg_bufs:
                self.bufs[v.id] = arg_bufs[v.id]
        last = _last_uses(block)
        out: list = []
        for pos, op in enumerate(block.ops):
            out.extend(self.op(op, pos, last))
        return out

    def op(self, op, pos: int, last: dict[int, int]) -> list:
        loc = getattr(op, "loc", None)
        if isinstance(op, ir.Full):
            return self.elementwise(op.out, "full", lambda vs: L.Lit(op.value, op.out.type.dtype), loc)
        if isinstance(op, ir.Iota):
            return self.elementwise(op.out, "iota", lambda vs: L.Ix(vs[op.axis], op.out.type.dtype), loc)
        if isinstance(op, ir.IndexValue):
            return self.elementwise(op.out, "index", lambda vs: L.Ix(self.sub(op.expr), op.out.type.dtype), loc)
        if isinstance(op, ir.Cast):
            return self.elementwise(op.out, "cast", lambda vs: L.Cvt(self.load(op.x, self.operand_index(
                op.x, op.out.type, vs)), op.out.type.dtype), loc)
        if isinstance(op, ir.Unary):
            return self.elementwise(op.out, op.fn, lambda vs: L.Un(op.fn, self.load(op.x, self.operand_index(
                op.x, op.out.type, vs)), op.out.type.dtype), loc)
        if isinstance(op, ir.Binary):
            if op.out.id in self.accum_yields:
                return self.accum_binary(op, loc)
            t = op.out.type
            return self.elementwise(op.out, op.fn, lambda vs: L.Bin(
                op.fn, self.load(op.a, self.operand_index(op.a, t, vs)),
                self.load(op.b, self.operand_index(op.b, t, vs)), t.dtype), loc)
        if isinstance(op, ir.Select):
            t = op.out.type
            return self.elementwise(op.out, "select", lambda vs: L.Sel(
                self.load(op.cond, self.operand_index(op.cond, t, vs)),
                self.load(op.a, self.operand_index(op.a, t, vs)),
                self.load(op.b, self.operand_index(op.b, t, vs)), t.dtype), loc)
        if isinstance(op, ir.Reshape):
            return self.elementwise(op.out, "reshape", lambda vs: self.load(op.x, _reshape_index(
                self.shape(op.out.type), self.shape(self.types[op.x]), vs)), loc)
        if isinstance(op, ir.ViewLoad):
            return self.view_load(op, loc)
        if isinstance(op, ir.ViewStore):
            return self.view_store(op, loc)
        if isinstance(op, ir.ReduceExpr):
            return self.reduce_expr(op, loc)
        if isinstance(op, ir.Mma):
            return self.mma(op, pos, last, loc)
        if isinstance(op, ir.Alloc):
            name = self.fresh(op.label or "mem")
            self.mems[op.mem] = name
            scope = "local" if op.scope == "auto" else op.scope
            return [L.Decl(L.Buffer(name, op.type.dtype, self.shape(op.type), scope), loc)]
        if isinstance(op, ir.MemStore):
            t = self.types[op.value]
            mem = self.mems[op.mem]
            wrap, vs = self.nest(f"{mem}.store", self.shape(t), tuple(map(str, t.dims)),
                                 ("parallel",) * t.rank, loc)
            return wrap([L.Assign(mem, vs, self.load(op.value, vs), loc)])
        if isinstance(op, ir.MemLoad):
            mem = self.mems[op.mem]
            return self.elementwise(op.out, "mload", lambda vs: L.Ld(mem, vs, op.out.type.dtype), loc)
        if isinstance(op, ir.Stage):
            return []
        if isinstance(op, ir.Parallel):
            return self.parallel(op)
        if isinstance(op, (ir.Serial, ir.Pipeline, ir.Reduce)):
            return self.loop(op, pos, last)
        raise CaptureError(f"library expansion does not handle {type(op).__name__}", loc, "report this")

    # ------------------------------------------------------------------ views
    def view_load(self, op: ir.ViewLoad, loc) -> list:
        tensor = self.p.tensor(op.tensor)
        origin = tuple(self.sub(o) for o in op.origin)
        t = op.out.type

        def value(vs):
            idx = tuple(ibin("add", o, v) for o, v in zip(origin, vs)) if t.rank else origin
            ld = L.Ld(op.tensor, idx, tensor.dtype)
            if op.bounds == "assume":
                return ld
            fill = self.load(op.fallback, ()) if op.fallback is not None else L.Lit(_zero(tensor.dtype), tensor.dtype)
            return L.Sel(L.Ix(in_bounds(idx, tensor.shape), "bool"), ld, fill, tensor.dtype)

        return self.elementwise(op.out, "load", value, loc)

    def view_store(self, op: ir.ViewStore, loc) -> list:
        tensor = self.p.tensor(op.tensor)
        origin = tuple(self.sub(o) for o in op.origin)
        extents = tuple(self.sub(e) for e in op.extents)
        axes = [a for a, p in enumerate(op.perm) if p is not None]
        wrap, vs = self.nest(f"{op.tensor}.store", tuple(extents[a] for a in axes),
                             tuple(str(tensor.dims[a]) for a in axes), ("parallel",) * len(axes), loc)
        var_of = dict(zip(axes, vs))
        idx = tuple(ibin("add", o, var_of[a]) if a in var_of else o for a, o in enumerate(origin))
        vt = self.types[op.value]
        vidx = [IConst(0)] * vt.rank
        for a, p in enumerate(op.perm):
            if p is not None:
                vidx[p] = var_of[a]
        stmt = L.Assign(op.tensor, idx, self.load(op.value, tuple(vidx)), loc)
        if op.bounds == "zero":
            stmt = L.If(in_bounds(idx, tensor.shape), ir.Block((), (stmt,)), loc)
        return wrap([stmt])

    # ------------------------------------------------------------------ reductions
    def reduce_expr(self, op: ir.ReduceExpr, loc) -> list:
        xt = self.types[op.x]
        t = op.out.type
        stmts, buf = self.decl(op.out.id)
        keep = [i for i in range(xt.rank) if i not in op.axes]
        seed = self.load(op.init, ()) if op.init is not None else L.Lit(
            identity(op.combiner, dtype_of(t.dtype)), t.dtype)
        init_wrap, ivs = self.nest(f"{buf}.init", self.shape(t), tuple(map(str, t.dims)), ("parallel",) * t.rank, loc)
        stmts += init_wrap([L.Assign(buf, ivs, seed, loc)])
        custom = op.combiner == "custom"
        red_kind = "serial" if custom else "reduce"
        order = keep + list(op.axes)
        xs = self.shape(xt)
        wrap, vs = self.nest(f"{buf}.reduce", tuple(xs[i] for i in order), tuple(str(xt.dims[i]) for i in order),
                             ("parallel",) * len(keep) + (red_kind,) * len(op.axes), loc)
        var_of = dict(zip(order, vs))
        xidx = []
        for i in range(xt.rank):
            v = var_of[i]
            if op.policy == "fold_right" and i in op.axes:
                v = ibin("sub", ibin("sub", xs[i], IConst(1)), v)
            xidx.append(v)
        out_idx = tuple(var_of[i] for i in keep)
        x = self.load(op.x, tuple(xidx))
        if custom:
            cur = L.Ld(buf, out_idx, t.dtype)
            args = (x, cur) if op.policy == "fold_right" else (cur, x)
            stmt = L.Assign(buf, out_idx, _inline(op.fn, args), loc)
        else:
            policy = "fold_left" if op.policy == "fold_right" else op.policy
            stmt = L.Accum(buf, out_idx, op.combiner, x, policy, loc)
        return stmts + wrap([stmt])

    def mma(self, op: ir.Mma, pos: int, last: dict[int, int], loc) -> list:
        policy = "unordered_tree"
        if op.out.id in self.accum_yields:  # the merge of a reduce region: its updates follow the region's policy
            buf, _, policy = self.accum_yields[op.out.id]
            stmts: list = []
        elif last.get(op.c) == pos and op.c not in (op.a, op.b) and not self.p_is_tensor(op.c):
            buf = self.bufs[op.c]  # the accumulator dies here: accumulate in place
            self.bufs[op.out.id] = buf
            stmts = []
        else:
            stmts, buf = self.decl(op.out.id)
            ct = self.types[op.c]
            cw, cvs = self.nest(f"{buf}.copy", self.shape(ct), tuple(map(str, ct.dims)),
                                ("parallel",) * ct.rank, loc)
            stmts += cw([L.Assign(buf, cvs, self.load(op.c, cvs), loc)])
        ins, out = op.spec.split("->")
        sa, sb = ins.split(",")
        ta, tb, tc_ = self.types[op.a], self.types[op.b], op.out.type
        ext = {**dict(zip(sa, self.shape(ta))), **dict(zip(sb, self.shape(tb))), **dict(zip(out, self.shape(tc_)))}
        dim_of = {**dict(zip(sa, ta.dims)), **dict(zip(sb, tb.dims)), **dict(zip(out, tc_.dims))}
        red = [x for x in sa if x in sb and x not in out]
        letters = list(out) + red
        wrap, vs = self.nest(f"{buf}.mma", tuple(ext[x] for x in letters),
                             tuple(str(dim_of[x]) for x in letters),
                             ("parallel",) * len(out) + ("reduce",) * len(red), loc)
        v = dict(zip(letters, vs))
        dt = tc_.dtype

        def operand(vid, spec):
            ld = self.load(vid, tuple(v[x] for x in spec))
            return ld if ld.dtype == dt else L.Cvt(ld, dt)

        prod = L.Bin("mul", operand(op.a, sa), operand(op.b, sb), dt)
        return stmts + wrap([L.Accum(buf, tuple(v[x] for x in out), "add", prod, policy, loc)])

    def p_is_tensor(self, vid: int) -> bool:
        return self.bufs.get(vid) in {t.name for t in self.p.tensors}

    def accum_binary(self, op: ir.Binary, loc) -> list:
        buf, arg, policy = self.accum_yields[op.out.id]
        other = op.b if op.a == arg else op.a
        t = op.out.type
        wrap, vs = self.nest(f"{buf}.{op.fn}", self.shape(t), tuple(map(str, t.dims)),
                             ("parallel",) * t.rank, loc)
        val = self.load(other, self.operand_index(other, t, vs))
        merge = op.fn
        if op.fn == "sub":
            val, merge = L.Un("neg", val, t.dtype), "add"
        return wrap([L.Accum(buf, vs, merge, val, policy, loc)])

    # ------------------------------------------------------------------ regions
    def axes_loops(self, op, kind: str, body: list, reverse: bool = False,
                   pipelining: Optional[L.Pipelining] = None) -> list:
        label = op.name or kind
        names = tuple(str(a) for a in range(len(op.extents))) if len(op.extents) > 1 else ("",)
        ids = [next(self.var_ids) for _ in op.extents]
        exts = tuple(self.sub(e) for e in op.extents)
        for a, (vid, e) in enumerate(zip(ids, exts)):
            self.vars[(op.region, a)] = ibin("sub", ibin("sub", e, IConst(1)), IVar(vid, 0)) if reverse \
                else IVar(vid, 0)
        word = getattr(op, "binding", None)
        bindings = region_bindings(word, self.words, len(ids), op.loc) if word else (None,) * len(ids)
        if word:
            self.words.append(word)
        try:
            stmts = body()
        finally:
            if word:
                self.words.pop()
        if len(ids) > 1:
            label = self.fresh(label, prefix=True)
        for a in reversed(range(len(ids))):
            name = self.fresh(label if names[a] == "" else f"{label}.{names[a]}")
            stmts = [L.Loop(ids[a], name, exts[a], kind, ir.Block((), tuple(stmts)), bindings[a], IConst(0), op.loc,
                            pipelining if a == len(ids) - 1 else None)]
        return stmts

    def parallel(self, op: ir.Parallel) -> list:
        return self.axes_loops(op, "parallel", lambda: self.block(op.body, {}))

    def loop(self, op, pos: int, last: dict[int, int]) -> list:
        pre: list = []
        carry: list[str] = []
        read_in_body = set(op.body.yields).union(*(ir.uses(inner) for inner in op.body.ops))
        for j, (init, arg) in enumerate(zip(op.inits, op.body.args)):
            # reuse the init's buffer only if nothing else reads it: not later, not in the body, not another carry
            if last.get(init) == pos and init not in op.inits[:j] and init not in read_in_body \
                    and not self.p_is_tensor(init):
                carry.append(self.bufs[init])
            else:
                stmts, buf = self.decl(arg.id)
                t = arg.type
                w, vs = self.nest(f"{buf}.carry", self.shape(t), tuple(map(str, t.dims)),
                                  ("parallel",) * t.rank, op.loc)
                pre += stmts + w([L.Assign(buf, vs, self.load(init, vs), op.loc)])
                carry.append(buf)
        arg_bufs = {a.id: b for a, b in zip(op.body.args, carry)}
        kind = {ir.Serial: "serial", ir.Pipeline: "pipeline", ir.Reduce: "reduce"}[type(op)]
        merges = classify_updates(op, self.types) if isinstance(op, ir.Reduce) else None
        if isinstance(op, ir.Reduce) and op.policy not in ("fold_left", "fold_right"):
            merges = tree_merges(op, merges)
        reverse = isinstance(op, ir.Reduce) and op.policy == "fold_right"
        if isinstance(op, ir.Reduce) and merges is not None:
            policy = "fold_left" if op.policy == "fold_right" else op.policy
            for arg, y, m in zip(op.body.args, op.body.yields, merges):
                if m is not None:
                    self.accum_yields[y] = (arg_bufs[arg.id], arg.id, policy)
                    self.bufs[y] = arg_bufs[arg.id]
        elif isinstance(op, ir.Reduce):
            kind = "serial"

        def body() -> list:
            if isinstance(op, ir.Pipeline):
                return self.stages(op, arg_bufs, carry)
            stmts = self.block(op.body, arg_bufs)
            return stmts + self.writeback(op, carry)

        policy = L.Pipelining(op.region, op.window, op.interval) if isinstance(op, ir.Pipeline) else None
        out = pre + self.axes_loops(op, kind, body, reverse, policy)
        for v, buf in zip(op.outs, carry):
            self.bufs[v.id] = buf
        return out

    def stages(self, op: ir.Pipeline, arg_bufs: dict[int, str], carry: list[str]) -> list:
        """The pipeline body as its declarations, then its stage blocks (``semantics.pipeline.stages``: explicit cuts,
        else the inferred load / compute split); the carries' write-back ends the last stage. A cut opens no scope
        (seed 003), so the declarations a stage makes at its top level come first, where every stage sees them:
        no earlier stage could name them, so declaring them earlier in the iteration changes nothing."""
        for v in op.body.args:
            self.bufs[v.id] = arg_bufs[v.id]
        last = _last_uses(op.body)
        groups = stage_groups(op)
        decls: list = []
        blocks = []
        for k, (name, positions, inferred) in enumerate(groups):
            stmts = [st for pos in positions for st in self.op(op.body.ops[pos], pos, last)]
            if k == len(groups) - 1:
                stmts += self.writeback(op, carry)
            decls += [st for st in stmts if isinstance(st, L.Decl)]
            body = ir.Block((), tuple(st for st in stmts if not isinstance(st, L.Decl)))
            blocks.append(L.StageBlock(IConst(1), body, op.loc, pipeline=op.region, ordinal=k, name=name,
                                       inferred=inferred))
        return decls + blocks

    def writeback(self, op, carry: list[str]) -> list:
        """Copy each yield into its carry buffer, all at once (via temporaries when a yield is a carry)."""
        moves = [(self.bufs[y], buf, a.type) for y, buf, a in zip(op.body.yields, carry, op.body.args)
                 if self.bufs[y] != buf]
        stmts: list = []
        if len(moves) > 1 and any(src in carry for src, _, _ in moves):
            staged = []
            for src, buf, t in moves:
                s, tmp = self.decl_like(t)
                stmts += s + self.copy(tmp, t, src, op.loc)
                staged.append((tmp, buf, t))
            moves = staged
        for src, buf, t in moves:
            stmts += self.copy(buf, t, src, op.loc)
        return stmts

    def decl_like(self, t: ir.TileType) -> tuple[list, str]:
        name = self.fresh("tmp")
        return [L.Decl(L.Buffer(name, t.dtype, self.shape(t), "local"))], name

    def copy(self, dst: str, t: ir.TileType, src: str, loc) -> list:
        w, vs = self.nest(f"{dst}.copy", self.shape(t), tuple(map(str, t.dims)),
                          ("parallel",) * t.rank, loc)
        return w([L.Assign(dst, vs, L.Ld(src, vs, t.dtype), loc)])


def _zero(dtype: str):
    dt = dtype_of(dtype)
    return False if dt.is_bool else (0 if dt.is_int else 0.0)


def _reshape_index(new: tuple[IExpr, ...], old: tuple[IExpr, ...], vs: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
    """Row-major: flat = sum v_i * stride_i over ``new``; old index_j = (flat // s_j) % old_j."""
    flat: IExpr = IConst(0)
    for v, n in zip(vs, new):
        flat = ibin("add", ibin("mul", flat, n), v)
    idx = []
    stride: IExpr = IConst(1)
    for n in reversed(old):
        idx.append(ibin("mod", ibin("floordiv", flat, stride), n))
        stride = ibin("mul", stride, n)
    return tuple(reversed(idx))


def _inline(fn: ir.Block, args: tuple) -> L.SExpr:
    """The scalar expression of a custom reducer's body applied to ``args``."""
    env = {a.id: x for a, x in zip(fn.args, args)}
    for op in fn.ops:
        dt = op.out.type.dtype
        if isinstance(op, ir.Full):
            env[op.out.id] = L.Lit(op.value, dt)
        elif isinstance(op, ir.Cast):
            env[op.out.id] = L.Cvt(env[op.x], dt)
        elif isinstance(op, ir.Unary):
            env[op.out.id] = L.Un(op.fn, env[op.x], dt)
        elif isinstance(op, ir.Binary):
            env[op.out.id] = L.Bin(op.fn, env[op.a], env[op.b], dt)
        elif isinstance(op, ir.Select):
            env[op.out.id] = L.Sel(env[op.cond], env[op.a], env[op.b], dt)
    return env[fn.yields[0]]


def _last_uses(block: ir.Block) -> dict[int, int]:
    last: dict[int, int] = {}
    for pos, op in enumerate(block.ops):
        for vid in ir.uses(op):
            last[vid] = pos
    for vid in block.yields:
        last[vid] = len(block.ops)
    return last


def expand(p: ir.Program) -> ir.Program:
    """The loop form of tile program ``p``."""
    if L.is_loop_form(ir.expect_program(p, "expand").body):
        return p
    return Expander(p).program()
