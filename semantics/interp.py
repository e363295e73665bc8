"""The reference interpreter: the meaning of a tile program.

Values carry leading *batch axes*: a parallel region whose body's extents do not depend
on its own coordinates is evaluated once for all its instances, each instance being one
position of a new batch axis (in the chosen instance order). Other parallel regions, and
every parallel region in checked mode, run their instances one by one. Serial and
pipeline regions run in lexicographic order; reduce regions follow their policy (see
``reduction``). In checked mode every tensor access of a parallel instance is recorded
and two instances that touch one cell, one of them writing, raise a
``NoninterferenceError`` that names both instances, the cell and both accesses.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

import numpy as np

from . import ir
from .dtypes import DType, dtype_of, store_as
from .errors import ExecutionError, InputError, Loc, NoninterferenceError, TilecertError
from .index import IExpr, evaluate, free_vars
from .reduction import combine
from .typing_rules import align_axes

ORDERS = ("canonical", "reverse", "shuffle")
REDUCE_MODES = ("canonical", "adversarial")

_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
    "mod": np.mod, "min": np.minimum, "max": np.maximum, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_UN = {"neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
       "not": np.logical_not}
_MERGE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum, "and": np.logical_and,
          "or": np.logical_or}


def _identity(fn: str, dt: DType) -> Any:
    if fn in ("add", "sub", "or"):
        return False if dt.is_bool else 0
    if fn in ("mul", "and"):
        return True if dt.is_bool else 1
    if dt.is_float:
        return -np.inf if fn == "max" else np.inf
    info = np.iinfo(dt.storage)
    return info.min if fn == "max" else info.max


@dataclass
class _Scope:
    """Access records of one execution of a parallel region (checked mode)."""

    region: ir.Parallel
    inst: tuple[int, ...] = ()
    # per tensor: lists of (cells, is_write, instance id, access id)
    cells: dict[str, list[tuple[np.ndarray, bool, int, int]]] = field(default_factory=dict)
    instances: list[tuple[int, ...]] = field(default_factory=list)
    accesses: list[tuple[str, Loc]] = field(default_factory=list)


class Interpreter:
    def __init__(self, program: ir.Program, sizes: Mapping[str, int], tensors: dict[str, np.ndarray], *,
                 order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical", checked: bool = True) -> None:
        self.p = program
        self.sizes = dict(sizes)
        self.tensors = tensors
        self.order = order
        self.rng = np.random.default_rng(seed)
        self.adversarial = reduce_mode == "adversarial"
        self.checked = checked
        self.env: dict[int, np.ndarray] = {}
        self.coords: dict[tuple[int, int], Any] = {}
        self.batch: list[int] = []  # extent of each batch axis
        self.mems: dict[int, np.ndarray] = {}
        self.mem_depth: dict[int, int] = {}
        self.scopes: list[_Scope] = []
        self.dtypes = {t.name: dtype_of(t.dtype) for t in program.tensors}
        self._batchable: dict[int, bool] = {}

    # ------------------------------------------------------------------ values
    @property
    def depth(self) -> int:
        return len(self.batch)

    def get(self, vid: int, rank: int) -> np.ndarray:
        """The value ``vid`` with its batch axes padded to the current depth."""
        arr = self.env[vid]
        d = arr.ndim - rank
        if d < self.depth:
            arr = arr.reshape(arr.shape[:d] + (1,) * (self.depth - d) + arr.shape[d:])
        return arr

    def value(self, v: ir.Value) -> np.ndarray:
        return self.get(v.id, v.type.rank)

    def set(self, v: ir.Value, arr: Any) -> None:
        self.env[v.id] = store_as(dtype_of(v.type.dtype), arr)

    def idx(self, e: IExpr) -> Any:
        return evaluate(e, self.sizes, self.coords)

    def extent(self, e: IExpr, what: str, loc: Loc) -> int:
        val = np.asarray(self.idx(e))
        if val.ndim and not np.all(val == val.flat[0]):
            raise ExecutionError(f"{what} {e} differs between batched instances", loc, "internal batching error")
        n = int(val.flat[0]) if val.ndim else int(val)
        if n < 0:
            raise ExecutionError(f"{what} {e} evaluates to {n} < 0", loc, "check the sizes")
        return n

    def shape_of(self, t: ir.TileType, loc: Loc) -> tuple[int, ...]:
        return tuple(self.extent(s, "tile extent", loc) for s in t.shape)

    # ------------------------------------------------------------------ program
    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.p.body, ())

    def block(self, block: ir.Block, args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        for v, a in zip(block.args, args):
            self.env[v.id] = a
        for op in block.ops:
            getattr(self, "op_" + type(op).__name__)(op)
        return tuple(self.env[y] for y in block.yields)

    # ------------------------------------------------------------------ elementwise
    def aligned(self, vid: int, src: ir.TileType, dst: ir.TileType) -> np.ndarray:
        arr = self.get(vid, src.rank)
        perm, missing = align_axes(src, dst)
        d = self.depth
        arr = arr.transpose(tuple(range(d)) + tuple(d + p for p in perm))
        for pos in missing:
            arr = np.expand_dims(arr, d + pos)
        return arr

    def op_Full(self, op: ir.Full) -> None:
        self.set(op.out, np.full(self.shape_of(op.out.type, op.loc), op.value))

    def op_Iota(self, op: ir.Iota) -> None:
        shape = self.shape_of(op.out.type, op.loc)
        r = np.arange(shape[op.axis]).reshape((1,) * op.axis + (-1,) + (1,) * (len(shape) - op.axis - 1))
        self.set(op.out, np.broadcast_to(r, shape))

    def op_IndexValue(self, op: ir.IndexValue) -> None:
        self.set(op.out, np.asarray(self.idx(op.expr)))

    def op_Cast(self, op: ir.Cast) -> None:
        self.set(op.out, self.get(op.x, op.out.type.rank))

    def op_Unary(self, op: ir.Unary) -> None:
        self.set(op.out, _UN[op.fn](self.get(op.x, op.out.type.rank)))

    def op_Binary(self, op: ir.Binary) -> None:
        ta, tb = self.types[op.a], self.types[op.b]
        a = self.aligned(op.a, ta, op.out.type)
        b = self.aligned(op.b, tb, op.out.type)
        if op.fn in ("floordiv", "mod") and np.any(b == 0):
            raise ExecutionError(f"integer {op.fn} by zero", op.loc, "guard the divisor with tc.where")
        self.set(op.out, _BIN[op.fn](a, b))

    def op_Select(self, op: ir.Select) -> None:
        t = op.out.type
        c = self.aligned(op.cond, self.types[op.cond], t)
        a = self.aligned(op.a, self.types[op.a], t)
        b = self.aligned(op.b, self.types[op.b], t)
        self.set(op.out, np.where(c, a, b))

    def op_Reshape(self, op: ir.Reshape) -> None:
        src = self.types[op.x]
        arr = self.get(op.x, src.rank)
        d = arr.ndim - src.rank
        new = self.shape_of(op.out.type, op.loc)
        if int(np.prod(arr.shape[d:], dtype=np.int64)) != int(np.prod(new, dtype=np.int64)):
            raise ExecutionError(f"reshape of {arr.shape[d:]} into {new}", op.loc, "keep the element count")
        self.set(op.out, arr.reshape(arr.shape[:d] + new))

    # ------------------------------------------------------------------ reductions and mma
    def op_ReduceExpr(self, op: ir.ReduceExpr) -> None:
        src = self.types[op.x]
        arr = self.get(op.x, src.rank)
        d = arr.ndim - src.rank
        axes = [d + a for a in op.axes]
        keep = [i for i in range(arr.ndim) if i not in axes]
        moved = arr.transpose(axes + keep)
        n = int(np.prod(moved.shape[: len(axes)], dtype=np.int64))
        items = moved.reshape((n,) + moved.shape[len(axes):])
        dt = dtype_of(src.dtype)
        if op.combiner == "custom":
            merge = self._custom_merge(op, dt)
            ufunc = None
        else:
            ufunc = _MERGE[op.combiner]
            merge = self._ufunc_merge(ufunc, dt)
        if op.init is not None:
            seed = self.get(op.init, 0)
        else:
            seed = np.asarray(_identity(op.combiner, dt), dtype=dt.storage)
        seed = seed.reshape(seed.shape + (1,) * (items.ndim - 1 - seed.ndim)) if seed.ndim else seed
        use_ufunc = ufunc if dt.name != "bf16" else None
        self.set(op.out, combine(store_as(dt, seed), items, merge, op.policy, self.adversarial, self.rng, use_ufunc))

    @staticmethod
    def _ufunc_merge(ufunc: np.ufunc, dt: DType):
        return lambda a, b: store_as(dt, ufunc(a, b))

    def _custom_merge(self, op: ir.ReduceExpr, dt: DType):
        fn = op.fn
        assert fn is not None

        def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            saved = self.batch
            self.batch = []  # the reducer body is elementwise over whole arrays
            try:
                out = self.block(fn, (np.asarray(a), np.asarray(b)))[0]
            finally:
                self.batch = saved
            return store_as(dt, out)

        return merge

    def op_Mma(self, op: ir.Mma) -> None:
        ins, out = op.spec.split("->")
        sa, sb = ins.split(",")
        acc_t = dtype_of(op.out.type.dtype)
        calc = np.float32 if acc_t.name == "bf16" else acc_t.storage
        a = self.get(op.a, len(sa)).astype(calc, copy=False)
        b = self.get(op.b, len(sb)).astype(calc, copy=False)
        c = self.get(op.c, len(out))
        d = self.depth
        batch = [x for x in sa if x in sb and x in out]
        m = [x for x in sa if x not in sb]
        k = [x for x in sa if x in sb and x not in out]
        n = [x for x in sb if x not in sa]
        size = {**dict(zip(sa, a.shape[d:])), **dict(zip(sb, b.shape[d:]))}

        def prod(letters):
            return int(np.prod([size[x] for x in letters], dtype=np.int64))

        def canon(arr, spec, groups):
            order = [spec.index(x) for g in groups for x in g]
            arr = arr.transpose(tuple(range(d)) + tuple(d + i for i in order))
            return arr.reshape(arr.shape[:d] + tuple(prod(g) for g in groups))

        am = canon(a, sa, (batch, m, k))
        bm = canon(b, sb, (batch, k, n))
        res = np.matmul(am, bm)
        res = res.reshape(res.shape[:d] + tuple(size[x] for x in batch + m + n))
        cur = batch + m + n
        res = res.transpose(tuple(range(d)) + tuple(d + cur.index(x) for x in out))
        self.set(op.out, c.astype(calc, copy=False) + res)

    # ------------------------------------------------------------------ tensors
    def _box_indices(self, tensor: str, origin: tuple[IExpr, ...], extents: tuple[IExpr, ...], loc: Loc):
        """Per-cell index arrays (batch + box shape) and the in-bounds mask."""
        shape = self.tensors[tensor].shape
        box = tuple(self.extent(e, "box extent", loc) for e in extents)
        r = len(box)
        org = [np.asarray(self.idx(o)) for o in origin]
        depth = max([o.ndim for o in org] + [0])
        idx = []
        for a, (o, ext) in enumerate(zip(org, box)):
            o = o.reshape(o.shape + (1,) * (depth - o.ndim)) if o.ndim < depth and o.ndim else o
            o = o.reshape(o.shape + (1,) * r)
            off = np.arange(ext).reshape((1,) * a + (ext,) + (1,) * (r - a - 1))
            idx.append(o + off)
        idx = np.broadcast_arrays(*idx) if idx else []
        mask = np.ones(idx[0].shape if idx else (), dtype=bool)
        for a, ia in enumerate(idx):
            mask &= (ia >= 0) & (ia < shape[a])
        return idx, mask, box

    def _oob(self, tensor: str, idx, mask, loc: Loc, what: str) -> None:
        bad = np.argwhere(~mask)[0]
        coords = tuple(int(ia[tuple(bad)]) for ia in idx)
        raise ExecutionError(f"{what} of {tensor} at {coords} is out of bounds {self.tensors[tensor].shape} "
                             "under bounds='assume'", loc, "use bounds='zero' or keep the box inside the tensor")

    def op_ViewLoad(self, op: ir.ViewLoad) -> None:
        idx, mask, box = self._box_indices(op.tensor, op.origin, op.extents, op.loc)
        if op.bounds == "assume" and not mask.all():
            self._oob(op.tensor, idx, mask, op.loc, "load")
        t = self.tensors[op.tensor]
        clipped = tuple(np.where(mask, ia, 0) for ia in idx)
        vals = t[clipped] if t.size else np.zeros(mask.shape, t.dtype)
        fill = self.get(op.fallback, 0) if op.fallback is not None else np.zeros((), t.dtype)
        if fill.ndim:
            fill = fill.reshape(fill.shape + (1,) * (vals.ndim - fill.ndim))
        vals = np.where(mask, vals, fill)
        if self.checked and self.scopes:
            self._record(op.tensor, idx, mask, False, f"load at {op.loc}")
        d = vals.ndim - len(box)
        self.set(op.out, vals.reshape(vals.shape[:d] + self.shape_of(op.out.type, op.loc)))

    def op_ViewStore(self, op: ir.ViewStore) -> None:
        idx, mask, box = self._box_indices(op.tensor, op.origin, op.extents, op.loc)
        if op.bounds == "assume" and not mask.all():
            self._oob(op.tensor, idx, mask, op.loc, "store")
        vt = self.types[op.value]
        arr = self.get(op.value, vt.rank)
        d = arr.ndim - vt.rank
        used = [p for p in op.perm if p is not None]
        arr = arr.transpose(tuple(range(d)) + tuple(d + p for p in used))
        shaped = []
        it = iter(arr.shape[d:])
        for p in op.perm:
            shaped.append(next(it) if p is not None else 1)
        arr = arr.reshape(arr.shape[:d] + tuple(shaped))
        full_shape = np.broadcast_shapes(arr.shape, mask.shape) if mask.ndim else arr.shape
        arr = np.broadcast_to(arr, full_shape)
        idx = [np.broadcast_to(ia, full_shape) for ia in idx]
        mask = np.broadcast_to(mask, full_shape)
        if self.checked and self.scopes:
            self._record(op.tensor, idx, mask, True, f"store at {op.loc}")
        t = self.tensors[op.tensor]
        t[tuple(ia[mask] for ia in idx)] = arr[mask]

    # ------------------------------------------------------------------ memories
    def op_Alloc(self, op: ir.Alloc) -> None:
        shape = self.shape_of(op.type, op.loc)
        self.mems[op.mem] = np.zeros(tuple(self.batch) + shape, dtype_of(op.type.dtype).storage)
        self.mem_depth[op.mem] = self.depth

    def op_MemStore(self, op: ir.MemStore) -> None:
        mem = self.mems[op.mem]
        rank = mem.ndim - self.mem_depth[op.mem]
        val = self.get(op.value, rank)
        mem[...] = np.broadcast_to(val[(0,) * (val.ndim - mem.ndim)] if val.ndim > mem.ndim else val, mem.shape)

    def op_MemLoad(self, op: ir.MemLoad) -> None:
        self.set(op.out, self.mems[op.mem].copy())

    def op_Stage(self, op: ir.Stage) -> None:
        """Stage cuts are schedule boundaries, not runtime effects."""

    # ------------------------------------------------------------------ regions
    def _points(self, extents: tuple[int, ...]):
        return itertools.product(*(range(e) for e in extents))

    def _set_point(self, region: int, point: tuple[int, ...]) -> None:
        for a, x in enumerate(point):
            self.coords[(region, a)] = x

    def _instance_order(self, n: int) -> np.ndarray:
        if self.order == "reverse":
            return np.arange(n)[::-1]
        if self.order == "shuffle":
            return self.rng.permutation(n)
        return np.arange(n)

    def batchable(self, op: ir.Parallel) -> bool:
        """Extents inside the body (regions, tiles, boxes) must not read this region's coordinates."""
        if op.region not in self._batchable:
            self._batchable[op.region] = not any(
                r == op.region for e in _body_extents(op.body) for r, _ in free_vars(e))
        return self._batchable[op.region]

    def op_Parallel(self, op: ir.Parallel) -> None:
        ext = tuple(self.extent(e, "parallel extent", op.loc) for e in op.extents)
        n = int(np.prod(ext, dtype=np.int64))
        if n == 0:
            return
        order = self._instance_order(n)
        if not self.checked and self.batchable(op):
            coords = np.unravel_index(order, ext)
            d = self.depth
            for a, c in enumerate(coords):
                self.coords[(op.region, a)] = c.reshape((1,) * d + (n,))
            self.batch.append(n)
            try:
                self.block(op.body, ())
            finally:
                self.batch.pop()
            return
        scope = _Scope(op) if self.checked else None
        if scope is not None:
            self.scopes.append(scope)
        try:
            for flat in order:
                point = tuple(int(c) for c in np.unravel_index(int(flat), ext))
                self._set_point(op.region, point)
                if scope is not None:
                    scope.inst = point
                    scope.instances.append(point)
                self.block(op.body, ())
        finally:
            if scope is not None:
                self.scopes.pop()
        if scope is not None:
            self._check_scope(scope)

    def _loop(self, op: ir.Loop, reverse: bool = False) -> None:
        ext = tuple(self.extent(e, "loop extent", op.loc) for e in op.extents)
        carries = tuple(self.get(i, self.types[i].rank) for i in op.inits)
        points = list(self._points(ext))
        for point in (reversed(points) if reverse else points):
            self._set_point(op.region, point)
            carries = self.block(op.body, carries)
        for v, c in zip(op.outs, carries):
            self.env[v.id] = c

    def op_Serial(self, op: ir.Serial) -> None:
        self._loop(op)

    def op_Pipeline(self, op: ir.Pipeline) -> None:
        self._loop(op)

    def op_Reduce(self, op: ir.Reduce) -> None:
        if op.policy in ("fold_left", "fold_right"):
            self._loop(op, reverse=op.policy == "fold_right")
            return
        merges = classify_updates(op, self.types)
        if merges is None:
            raise ExecutionError(f"reduce region with policy {op.policy} has an update with no known merge",
                                 op.loc, "write the update as s = s + x (or *, max, min, -, mma), or use "
                                         "policy='fold_left' for a strict fold")
        self._tree_reduce(op, merges)

    def _tree_reduce(self, op: ir.Reduce, merges: list[Optional[str]]) -> None:
        """Evaluate each iteration's contribution with the states at their identity, then merge by policy."""
        ext = tuple(self.extent(e, "reduce extent", op.loc) for e in op.extents)
        inits = [self.get(i, self.types[i].rank) for i in op.inits]
        ids = []
        for v, m in zip(op.body.args, merges):
            dt = dtype_of(v.type.dtype)
            ids.append(np.asarray(_identity(m, dt), dt.storage) if m else None)
        contributions: list[list[np.ndarray]] = [[] for _ in op.inits]
        for point in self._points(ext):
            self._set_point(op.region, point)
            args = tuple(ids[j] if merges[j] else inits[j] for j in range(len(inits)))
            ys = self.block(op.body, args)
            for j, y in enumerate(ys):
                contributions[j].append(y)
        for j, v in enumerate(op.outs):
            m = merges[j]
            if m is None:
                self.env[v.id] = inits[j]
                continue
            dt = dtype_of(v.type.dtype)
            seed = inits[j]
            if not contributions[j]:
                self.env[v.id] = seed
                continue
            items = np.stack(np.broadcast_arrays(*contributions[j]))
            ufunc = _MERGE["add" if m == "sub" else m]
            merge = self._ufunc_merge(ufunc, dt)
            seed_b = np.broadcast_to(seed, np.broadcast_shapes(seed.shape, items.shape[1:]))
            items = np.broadcast_to(items, (items.shape[0],) + seed_b.shape)
            self.env[v.id] = combine(seed_b, items, merge, op.policy, self.adversarial, self.rng)

    # ------------------------------------------------------------------ noninterference (checked mode)
    def _record(self, tensor: str, idx, mask, is_write: bool, what: str) -> None:
        scope = self.scopes[-1]
        shape = self.tensors[tensor].shape
        cells = np.ravel_multi_index(tuple(np.asarray(ia)[mask] for ia in idx), shape) if len(shape) else \
            np.zeros(int(mask.sum()), np.int64)
        cells = np.unique(cells)
        inst = len(scope.instances) - 1
        scope.accesses.append((what, scope.inst))
        scope.cells.setdefault(tensor, []).append((cells, is_write, inst, len(scope.accesses) - 1))

    def _check_scope(self, scope: _Scope) -> None:
        for tensor, recs in scope.cells.items():
            if not recs:
                continue
            cells = np.concatenate([r[0] for r in recs])
            writes = np.concatenate([np.full(len(r[0]), r[1]) for r in recs])
            insts = np.concatenate([np.full(len(r[0]), r[2]) for r in recs])
            acc = np.concatenate([np.full(len(r[0]), r[3]) for r in recs])
            pairs = np.unique(np.stack([cells, insts], axis=1), axis=0)
            cell_ids, counts = np.unique(pairs[:, 0], return_counts=True)
            shared = cell_ids[counts > 1]
            bad = np.intersect1d(shared, np.unique(cells[writes]))
            if bad.size:
                self._report(tensor, int(bad[0]), cells, writes, insts, acc, scope)
        parent = self.scopes[-1] if self.scopes else None
        if parent is None:
            return
        inst = len(parent.instances) - 1
        for tensor, recs in scope.cells.items():
            for cells, is_write, _, a in recs:
                what, _ = scope.accesses[a]
                parent.accesses.append((what, parent.inst))
                parent.cells.setdefault(tensor, []).append((cells, is_write, inst, len(parent.accesses) - 1))

    def _report(self, tensor, cell, cells, writes, insts, acc, scope: _Scope) -> None:
        at = np.nonzero(cells == cell)[0]
        w = next(i for i in at if writes[i])
        other = next(i for i in at if insts[i] != insts[w])
        coords = tuple(int(c) for c in np.unravel_index(cell, self.tensors[tensor].shape))
        i1, i2 = scope.instances[insts[w]], scope.instances[insts[other]]
        a1, a2 = scope.accesses[acc[w]][0], scope.accesses[acc[other]][0]
        raise NoninterferenceError(
            f"parallel region r{scope.region.region}: instances {i1} and {i2} both access {tensor}{list(coords)}: "
            f"instance {i1} by the {a1}, instance {i2} by the {a2}",
            scope.region.loc,
            "parallel instances must not touch a cell another instance writes; use a reduction, or a serial region")

    @property
    def types(self) -> dict[int, ir.TileType]:
        if not hasattr(self, "_types_cache"):
            table: dict[int, ir.TileType] = {}
            for op in ir.walk(self.p.body):
                for v in ir.results_of(op):
                    table[v.id] = v.type
                body = getattr(op, "body", None)
                if body is not None:
                    for v in body.args:
                        table[v.id] = v.type
                fn = getattr(op, "fn", None)
                if isinstance(fn, ir.Block):
                    for v in fn.args:
                        table[v.id] = v.type
                    for inner in ir.walk(fn):
                        for v in ir.results_of(inner):
                            table[v.id] = v.type
            self._types_cache = table
        return self._types_cache


def _body_extents(block: ir.Block):
    for op in ir.walk(block):
        for v in ir.results_of(op):
            yield from v.type.shape
        yield from getattr(op, "extents", ())
        if isinstance(op, ir.Alloc):
            yield from op.type.shape


def classify_updates(op: ir.Reduce, types: Mapping[int, ir.TileType]) -> Optional[list[Optional[str]]]:
    """For each carried state, the merge its update uses (None: passed through unchanged).

    An update ``s' = s (+ * max min & |) e`` or ``s' = s - e`` or ``s' = mma(a, b, s)``
    whose contribution ``e`` (or ``a``, ``b``) does not depend on any state has merge
    ``+``, ``*``, ... (``-`` merges by ``+`` of negated contributions). Any other update
    returns None for the whole region: no tree is admitted without a known merge.
    """
    args = [v.id for v in op.body.args]
    defs = {r.id: o for o in op.body.ops for r in ir.results_of(o)}
    dependent = set(args)
    for o in ir.walk(op.body):
        reads = set(ir.operands_of(o))
        if reads & dependent:
            dependent |= {r.id for r in ir.results_of(o)}
    merges: list[Optional[str]] = []
    for arg, y in zip(args, op.body.yields):
        if y == arg:
            merges.append(None)
            continue
        d = defs.get(y)
        if isinstance(d, ir.Binary) and d.fn in ("add", "mul", "min", "max", "and", "or", "sub"):
            other = d.b if d.a == arg else (d.a if d.b == arg and d.fn != "sub" else None)
            if other is not None and other not in dependent and types[other] == types[arg]:
                merges.append(d.fn)
                continue
        if isinstance(d, ir.Mma) and d.c == arg and d.a not in dependent and d.b not in dependent:
            merges.append("add")
            continue
        return None
    return merges


def bind_sizes(p: ir.Program, arrays: Mapping[str, Any], sizes: Mapping[str, int]) -> dict[str, int]:
    """Size parameters from the arrays' shapes (and explicit sizes), checked for consistency."""
    bound: dict[str, int] = {}
    where: dict[str, str] = {}
    for name, val in sizes.items():
        if name not in p.sizes:
            raise InputError(f"unknown size or argument {name!r} for kernel {p.name}", p.loc,
                             f"tensors are {[t.name for t in p.tensors]}, sizes are {list(p.sizes)}")
        if not isinstance(val, (int, np.integer)) or val < 0:
            raise InputError(f"size {name} must be an int >= 0, got {val!r}", p.loc, "pass an int")
        bound[name] = int(val)
        where[name] = "the explicit size"
    for t in p.tensors:
        arr = arrays[t.name]
        if arr.ndim != len(t.shape):
            raise InputError(f"{t.name} has rank {arr.ndim}; the kernel declares rank {len(t.shape)}", p.loc,
                             f"pass a {len(t.shape)}-d array")
        for axis, s in enumerate(t.shape):
            name = str(s)
            n = arr.shape[axis]
            if name in bound and bound[name] != n:
                raise InputError(f"size {name} is {bound[name]} from {where[name]} but {n} from {t.name} axis {axis}",
                                 p.loc, "tensors that share a dim name must agree on its extent")
            bound[name] = n
            where[name] = f"{t.name} axis {axis}"
    return bound


def prepare_inputs(p: ir.Program, kwargs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    arrays: dict[str, np.ndarray] = {}
    rest = dict(kwargs)
    for t in p.tensors:
        if t.name not in rest:
            raise InputError(f"missing array for tensor {t.name}", p.loc, f"pass {t.name}=numpy_array")
        arr = rest.pop(t.name)
        if not isinstance(arr, np.ndarray):
            raise InputError(f"{t.name} must be a numpy array, got {type(arr).__name__}", p.loc, "use np.asarray(...)")
        dt = dtype_of(t.dtype)
        if arr.dtype != dt.storage:
            raise InputError(f"{t.name} has dtype {arr.dtype}; the kernel declares {t.dtype}", p.loc,
                             f"pass {t.name}.astype(np.{dt.storage})")
        arrays[t.name] = store_as(dt, np.array(arr, copy=True))
    sizes = bind_sizes(p, arrays, rest)
    return arrays, sizes


def interpret(p: ir.Program, order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical",
              checked: bool = True, **arrays_and_sizes: Any) -> dict[str, np.ndarray]:
    """Run ``p`` on copies of the given arrays; returns the written tensors by name."""
    if order not in ORDERS:
        raise InputError(f"unknown order {order!r}", p.loc, f"use one of {ORDERS}")
    if reduce_mode not in REDUCE_MODES:
        raise InputError(f"unknown reduce_mode {reduce_mode!r}", p.loc, f"use one of {REDUCE_MODES}")
    arrays, sizes = prepare_inputs(p, arrays_and_sizes)
    Interpreter(p, sizes, arrays, order=order, seed=seed, reduce_mode=reduce_mode, checked=checked).run()
    return {name: arrays[name] for name in p.outputs}


__all__ = ["interpret", "Interpreter", "TilecertError", "ORDERS", "REDUCE_MODES"]
