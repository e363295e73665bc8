"""The fast interpreter: the reference interpreter's meaning (``interp``), computed in batches.

Tests hold it bitwise equal to ``interp`` in canonical order, with the same conflicts in
checked mode. Values carry leading *batch axes*: a parallel region whose body's extents do
not depend on its own coordinates is evaluated once for all its instances, one batch axis
per axis of its domain (each in the chosen instance order; a size-1 batch axis broadcasts,
so a value that does not depend on a coordinate is computed once). Other parallel regions
run their instances one by one. Serial and pipeline regions run in lexicographic order;
reduce regions follow their policy (see ``reduction``).

A loop is also evaluated over its whole domain at once (a batch axis over its iterations)
when that computes the same values: the body stores nothing, its extents do not depend on
the loop's coordinates and each carried state is updated by a known merge of a
state-independent contribution (``s = s + e``, ``mma(a, b, s)``, ...). A serial, pipeline
or fold reduce loop then folds the contributions strictly in order; a tree reduce combines
them by its policy exactly as iteration by iteration. Loads use strided windows, and mma
products one layout plan per operand shape (``_mma_plan``).

Checked mode runs the same batches and records, per access, the box each parallel instance
touches (one per batch point) with its instance number (``conflicts.Recorder``, which
compares boxes pairwise; a batched region is a grouped scope over the enclosing instances).
Only tensors the program writes are recorded: a cell nobody writes cannot conflict.

Each block is compiled once into a list of closures (index expressions with the sizes
folded in, shapes, axis permutations); executing a block calls them in order, and compiled
interpreters are kept per (program, sizes, mode).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import ir
from .dtypes import DType, dtype_of, store_as
from .conflicts import Grid, Recorder
from .errors import ExecutionError, Loc, TilecertError
from .index import INDEX_OPS, IBin, IConst, IExpr, INot, ISize, IVar, free_vars
from .inputs import prepare_inputs
from .interp import ORDERS, REDUCE_MODES, check_modes, instance_order, type_table
from .limits import allocatable
from .reduction import classify_updates, combine, tree_merges
from .typing_rules import align_axes
from .ufuncs import BINARY, MERGE, UNARY, identity


# A batched region whose values would exceed this many elements runs in chunks.
BATCH_BUDGET = 1 << 23

_NOHOLD = (ir.ViewStore, ir.MemStore, ir.Alloc, ir.Parallel)  # ops that keep a loop from batching


def _scalar_box_inside(origins: Any, box: Any, shape: Any) -> tuple[bool, bool]:
    """(every origin is a scalar, the box at those origins lies inside ``shape``); the second is
    meaningful only when the first holds."""
    inside = True
    for o, b, n in zip(origins, box, shape):
        if isinstance(o, np.ndarray) and o.ndim:
            return False, inside
        if o < 0 or o + b > n:
            inside = False
    return True, inside


def _prod(xs) -> int:
    return math.prod(int(x) for x in xs)


def _align(a: Any, b: Any) -> tuple[Any, Any]:
    """Pad the lower-rank of two coordinate arrays with trailing axes (batch axes are a prefix)."""
    na = getattr(a, "ndim", 0)
    nb = getattr(b, "ndim", 0)
    if na and nb and na != nb:
        if na < nb:
            a = a.reshape(a.shape + (1,) * (nb - na))
        else:
            b = b.reshape(b.shape + (1,) * (na - nb))
    return a, b


def _pad(arr: np.ndarray, ndim: int) -> np.ndarray:
    """``arr`` with trailing unit axes up to ``ndim`` axes."""
    return arr.reshape(arr.shape + (1,) * (ndim - arr.ndim)) if arr.ndim < ndim else arr


@dataclass
class _Fold:
    """How a loop is evaluated over its whole domain at once (see the module doc)."""

    plan: list[Callable[[], None]]
    # per carried state: None (passed through) or (kind, operand or Mma op, merge fn, swapped)
    carries: list[Optional[tuple[str, Any, str, bool]]]


class Interpreter:
    def __init__(self, program: ir.Program, sizes: Mapping[str, int], tensors: dict[str, np.ndarray], *,
                 order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical", checked: bool = True) -> None:
        self.p = program
        self.sizes = dict(sizes)
        self.tensors = dict(tensors)  # the caller's arrays, updated in place by stores
        self.order = order
        self.rng = np.random.default_rng(seed)
        self.adversarial = reduce_mode == "adversarial"
        self.checked = checked
        self.recorder: Optional[Recorder] = Recorder() if checked else None
        self.inst = np.zeros((), np.int64)  # checked mode: the current instance numbers (see ``_note``)
        self.watched = {t.name for t in program.tensors if t.written}  # cells nobody writes cannot conflict
        self.env: dict[int, np.ndarray] = {}
        self.coords: dict[tuple[int, int], Any] = {}
        self.batch: list[int] = []  # extent of each batch axis
        self.depth = 0  # len(self.batch)
        self.mems: dict[int, np.ndarray] = {}
        self.mem_depth: dict[int, int] = {}
        self.dtypes = {t.name: dtype_of(t.dtype) for t in program.tensors}
        self.types = type_table(program)
        self._plans: dict[int, list[Callable[[], None]]] = {}
        self._ix: dict[int, tuple[Any, Callable[[], Any]]] = {}
        self._batchable: dict[int, bool] = {}
        self._folds: dict[int, Optional[_Fold]] = {}
        self._merges: dict[int, Optional[list[Optional[str]]]] = {}
        self._static_elems: dict[int, int] = {}
        self._windows: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        self._mma_infos: dict[int, tuple] = {}

    def reset(self, tensors: dict[str, np.ndarray], *, order: str = "canonical", seed: int = 0,
              reduce_mode: str = "canonical") -> None:
        """Prepare a compiled interpreter for another run of its program with the same sizes."""
        self.tensors.clear()
        self.tensors.update(tensors)
        self.order = order
        self.rng = np.random.default_rng(seed)
        self.adversarial = reduce_mode == "adversarial"
        self.env.clear()
        self.coords.clear()
        self.batch = []
        self.depth = 0
        self.mems.clear()
        self.mem_depth.clear()
        self.recorder = Recorder() if self.checked else None
        self.inst = np.zeros((), np.int64)
        self._windows.clear()

    # ------------------------------------------------------------------ values
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

    def _push(self, extents: tuple[int, ...]) -> None:
        self.batch.extend(extents)
        self.depth = len(self.batch)

    def _pop(self, n: int) -> None:
        del self.batch[len(self.batch) - n:]
        self.depth = len(self.batch)

    # ------------------------------------------------------------------ index expressions
    def _cx(self, e: IExpr) -> tuple[Any, Callable[[], Any]]:
        """``(constant or None, evaluator)`` for ``e``, sizes folded in (compiled once)."""
        hit = self._ix.get(id(e))
        if hit is None:
            hit = self._ix[id(e)] = self._compile_index(e)
        return hit

    def _compile_index(self, e: IExpr) -> tuple[Any, Callable[[], Any]]:
        if isinstance(e, (IConst, ISize)):
            v = e.value if isinstance(e, IConst) else self.sizes[e.name]
            return v, (lambda: v)
        if isinstance(e, IVar):
            coords = self.coords
            key = (e.region, e.axis)
            return None, (lambda: coords[key])
        if isinstance(e, INot):
            ca, fa = self._cx(e.a)
            if ca is not None:
                v = np.logical_not(ca)
                return v, (lambda: v)
            return None, (lambda: np.logical_not(fa()))
        if isinstance(e, IBin):
            f = INDEX_OPS[e.op]
            ca, fa = self._cx(e.a)
            cb, fb = self._cx(e.b)
            if e.op in ("floordiv", "mod") and (cb is None or not np.all(np.asarray(cb) != 0)):
                def checked_div() -> Any:
                    a, b = fa(), fb()
                    if np.any(np.asarray(b) == 0):
                        raise ExecutionError(f"index expression {e} divides by zero",
                                             hint="check the sizes and tile factors")
                    return f(*_align(a, b))
                return None, checked_div
            if ca is not None and cb is not None:
                v = f(ca, cb)
                return v, (lambda: v)
            if cb is not None:
                return None, (lambda: f(fa(), cb))
            if ca is not None:
                return None, (lambda: f(ca, fb()))
            return None, (lambda: f(*_align(fa(), fb())))
        raise TypeError(f"not an index expression: {e!r}")

    def idx(self, e: IExpr) -> Any:
        return self._cx(e)[1]()

    def _as_extent(self, val: Any, e: IExpr, what: str, loc: Loc) -> int:
        if isinstance(val, np.ndarray) and val.ndim:
            if not np.all(val == val.flat[0]):
                raise ExecutionError(f"{what} {e} differs between batched instances", loc, "internal batching error")
            val = val.flat[0]
        n = int(val)
        if n < 0:
            raise ExecutionError(f"{what} {e} evaluates to {n} < 0", loc, "check the sizes")
        return n

    def extent(self, e: IExpr, what: str, loc: Loc) -> int:
        return self._as_extent(self.idx(e), e, what, loc)

    def _shape_fn(self, exprs: tuple[IExpr, ...], what: str, loc: Loc
                  ) -> tuple[Optional[tuple[int, ...]], Callable[[], tuple[int, ...]]]:
        """``(constant shape or None, evaluator)`` for a tuple of extents."""
        parts = []
        for e in exprs:
            c, f = self._cx(e)
            if c is not None and not isinstance(c, np.ndarray) and int(c) >= 0:
                parts.append((int(c), None))
            else:
                parts.append((None, (lambda f=f, e=e: self._as_extent(f(), e, what, loc))))
        if all(g is None for _, g in parts):
            tup = tuple(c for c, _ in parts)
            return tup, (lambda: tup)
        return None, (lambda: tuple(c if g is None else g() for c, g in parts))

    def shape_of(self, t: ir.TileType, loc: Loc) -> tuple[int, ...]:
        return self._shape_fn(t.shape, "tile extent", loc)[1]()

    # ------------------------------------------------------------------ program
    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.p.body, ())

    def _plan(self, block: ir.Block) -> list[Callable[[], None]]:
        plan = self._plans.get(id(block))
        if plan is None:
            plan = self._plans[id(block)] = self._plan_ops(block, block.ops, set(block.yields))
        return plan

    def _plan_ops(self, block: ir.Block, ops, keep: set[int]) -> list[Callable[[], None]]:
        """Closures for ``ops`` (of ``block``) in order; each value of the block is dropped from
        the environment after its last use, unless it is in ``keep`` (so its memory is reused)."""
        ops = [op for op in ops if not isinstance(op, ir.Stage)]
        mine = {v.id for v in block.args} | {v.id for op in block.ops for v in ir.results_of(op)}
        last: dict[int, int] = {}
        for i, op in enumerate(ops):
            for v in ir.results_of(op):
                last[v.id] = i
            for vid in _reads(op):
                last[vid] = i
        frees: list[list[int]] = [[] for _ in ops]
        for vid, i in last.items():
            if vid in mine and vid not in keep:
                frees[i].append(vid)
        plan = []
        env = self.env
        for op, drop in zip(ops, frees):
            f = self._compile(op)
            if drop:
                def f(f=f, drop=tuple(drop)) -> None:
                    f()
                    for vid in drop:
                        env.pop(vid, None)
            plan.append(f)
        return plan

    def _compile(self, op: Any) -> Callable[[], None]:
        return getattr(self, "_c_" + type(op).__name__)(op)

    def block(self, block: ir.Block, args: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        env = self.env
        for v, a in zip(block.args, args):
            env[v.id] = a
        for f in self._plan(block):
            f()
        return tuple(env[y] for y in block.yields)

    # ------------------------------------------------------------------ elementwise
    def _aligner(self, vid: int, dst: ir.TileType) -> Callable[[], np.ndarray]:
        """A reader of ``vid`` laid out in ``dst``'s axis order (missing dims as unit axes)."""
        src = self.types[vid]
        rank = src.rank
        perm, missing = align_axes(src, dst)
        get = self.get
        if perm == tuple(range(rank)) and not missing:
            return lambda: get(vid, rank)

        def read() -> np.ndarray:
            arr = get(vid, rank)
            d = arr.ndim - rank
            arr = arr.transpose(tuple(range(d)) + tuple(d + p for p in perm))
            if missing:
                arr = np.expand_dims(arr, tuple(d + m for m in missing))
            return arr
        return read

    def _c_Full(self, op: ir.Full) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid = self.env, op.out.id
        const, shape = self._shape_fn(op.out.type.shape, "tile extent", op.loc)
        if const is not None:
            arr = store_as(dt, np.full(allocatable(const, dt.storage.itemsize, "a tc.full tile", op.loc), op.value))
            arr.flags.writeable = False
            return lambda: env.__setitem__(oid, arr)
        return lambda: env.__setitem__(oid, store_as(dt, np.full(allocatable(shape(), dt.storage.itemsize,
                                                                             "a tc.full tile", op.loc), op.value)))

    def _c_Iota(self, op: ir.Iota) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid = self.env, op.out.id
        _, shape_f = self._shape_fn(op.out.type.shape, "tile extent", op.loc)

        def run() -> None:
            shape = allocatable(shape_f(), dt.storage.itemsize, "a tc.iota tile", op.loc)
            r = np.arange(shape[op.axis]).reshape((1,) * op.axis + (-1,) + (1,) * (len(shape) - op.axis - 1))
            env[oid] = store_as(dt, np.broadcast_to(r, shape))
        return run

    def _c_IndexValue(self, op: ir.IndexValue) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid = self.env, op.out.id
        c, f = self._cx(op.expr)
        if c is not None:
            arr = store_as(dt, np.asarray(c))
            return lambda: env.__setitem__(oid, arr)
        return lambda: env.__setitem__(oid, store_as(dt, np.asarray(f())))

    def _c_Cast(self, op: ir.Cast) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid, get, x, rank = self.env, op.out.id, self.get, op.x, op.out.type.rank
        return lambda: env.__setitem__(oid, store_as(dt, get(x, rank)))

    def _c_Unary(self, op: ir.Unary) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid, get, x, rank, fn = self.env, op.out.id, self.get, op.x, op.out.type.rank, UNARY[op.fn]
        return lambda: env.__setitem__(oid, store_as(dt, fn(get(x, rank))))

    def _c_Binary(self, op: ir.Binary) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid, fn = self.env, op.out.id, BINARY[op.fn]
        ra = self._aligner(op.a, op.out.type)
        rb = self._aligner(op.b, op.out.type)
        if op.fn in ("floordiv", "mod"):
            def run_div() -> None:
                a, b = ra(), rb()
                if np.any(b == 0):
                    raise ExecutionError(f"integer {op.fn} by zero", op.loc, "guard the divisor with tc.where")
                env[oid] = store_as(dt, fn(a, b))
            return run_div
        return lambda: env.__setitem__(oid, store_as(dt, fn(ra(), rb())))

    def _c_Select(self, op: ir.Select) -> Callable[[], None]:
        dt = dtype_of(op.out.type.dtype)
        env, oid, t = self.env, op.out.id, op.out.type
        rc, ra, rb = self._aligner(op.cond, t), self._aligner(op.a, t), self._aligner(op.b, t)
        return lambda: env.__setitem__(oid, store_as(dt, np.where(rc(), ra(), rb())))

    def _c_Reshape(self, op: ir.Reshape) -> Callable[[], None]:
        rank = self.types[op.x].rank
        env, oid, get = self.env, op.out.id, self.get
        _, shape_f = self._shape_fn(op.out.type.shape, "tile extent", op.loc)

        def run() -> None:
            arr = get(op.x, rank)
            d = arr.ndim - rank
            new = shape_f()
            if _prod(arr.shape[d:]) != _prod(new):
                raise ExecutionError(f"reshape of {arr.shape[d:]} into {new}", op.loc, "keep the element count")
            env[oid] = arr.reshape(arr.shape[:d] + new)
        return run

    # ------------------------------------------------------------------ reductions and mma
    def _c_ReduceExpr(self, op: ir.ReduceExpr) -> Callable[[], None]:
        src = self.types[op.x]
        rank = src.rank
        dt = dtype_of(src.dtype)
        keep = [i for i in range(rank) if i not in op.axes]
        tail = tuple(keep) + tuple(op.axes)
        if op.combiner == "custom":
            assert op.fn is not None
            merge = self._custom_merge(op.fn, dt)
            ufunc = None
        else:
            ufunc = MERGE[op.combiner]
            merge = self._ufunc_merge(ufunc, dt)
        use_ufunc = ufunc if dt.name != "bf16" else None
        # every order gives the same bits: integer arithmetic (it wraps), and min / max
        # (checked per result: a NaN's payload and a zero's sign can depend on the order)
        exact = op.combiner in ("max", "min") or (op.combiner != "custom" and not dt.is_float)
        seed_const = None if op.init is not None else store_as(dt, np.asarray(identity(op.combiner, dt), dt.storage))
        env, oid, get = self.env, op.out.id, self.get

        def run() -> None:
            arr = get(op.x, rank)
            d = arr.ndim - rank
            perm = tuple(range(d)) + tuple(d + a for a in tail)
            moved = arr.transpose(perm) if tail != tuple(range(rank)) else arr
            kept = moved.shape[:d + len(keep)]
            items = moved.reshape(kept + (_prod(moved.shape[d + len(keep):]),))
            seed = store_as(dt, get(op.init, 0)) if seed_const is None else seed_const
            if seed.ndim:
                seed = seed.reshape(seed.shape + (1,) * (items.ndim - 1 - seed.ndim))
            res = None
            if exact and items.shape[-1] and not (self.adversarial and op.policy.endswith("tree")):
                res = _order_free_reduce(ufunc, dt, seed, items)
            if res is None:
                res = combine(seed, items, merge, op.policy, self.adversarial, self.rng, use_ufunc, axis=-1)
            env[oid] = store_as(dt, res)
        return run

    @staticmethod
    def _ufunc_merge(ufunc: np.ufunc, dt: DType):
        return lambda a, b: store_as(dt, ufunc(a, b))

    def _custom_merge(self, fn: ir.Block, dt: DType):
        def merge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            saved = self.batch
            self.batch, self.depth = [], 0  # the reducer body is elementwise over whole arrays
            try:
                out = self.block(fn, (np.asarray(a), np.asarray(b)))[0]
            finally:
                self.batch, self.depth = saved, len(saved)
            return store_as(dt, out)

        return merge

    def _mma_info(self, op: ir.Mma) -> tuple:
        info = self._mma_infos.get(id(op))
        if info is None:
            ins, out = op.spec.split("->")
            sa, sb = ins.split(",")
            acc_t = dtype_of(op.out.type.dtype)
            calc = np.dtype(np.float32) if acc_t.name == "bf16" else acc_t.storage
            info = self._mma_infos[id(op)] = (sa, sb, out, calc, {})
        return info

    def _mma_product(self, info: tuple, aid: int, bid: int) -> np.ndarray:
        """``a @ b`` contracted per the spec: batch axes + ``out`` axes, in the calc dtype.

        A batch axis along which only ``a`` varies joins the rows of the matrix product,
        one along which only ``b`` varies joins its columns, and one along which both vary
        is a batch of the product; so operands shared between instances are multiplied once.
        The layout plan is computed once per pair of operand shapes. The contraction itself is
        ``_contract``: its bits do not depend on how instances are grouped into one product.
        """
        sa, sb, out, calc, plans = info
        a = self.get(aid, len(sa)).astype(calc, copy=False)
        b = self.get(bid, len(sb)).astype(calc, copy=False)
        key = (a.shape, b.shape)
        plan = plans.get(key)
        if plan is None:
            plan = plans[key] = _mma_plan(sa, sb, out, a.shape, b.shape, self.depth)
        pa, ra, pb, rb, two_d, rs, pr, final, buf = plan
        if buf is None:
            am = (a.transpose(pa) if pa is not None else a).reshape(ra)
            bm = (b.transpose(pb) if pb is not None else b).reshape(rb)
            res = _contract(am, bm)
        else:
            # large operands and products live in buffers kept for this op (they never escape
            # it: the caller consumes the product before the op runs again), so their pages
            # stay mapped from run to run
            am = _into(buf, 0, a.transpose(pa) if pa is not None else a, ra)
            bm = _into(buf, 1, b.transpose(pb) if pb is not None else b, rb)
            if buf[2] is None:
                buf[2] = np.empty(ra[:-1] + rb[-1:], calc)
            res = _contract(am, bm, out=buf[2])
        if rs is not None:
            res = res.reshape(rs)
        if pr is not None:
            res = res.transpose(pr)
        return res.reshape(final) if res.shape != final else res

    def _c_Mma(self, op: ir.Mma) -> Callable[[], None]:
        info = self._mma_info(op)
        acc_t = dtype_of(op.out.type.dtype)
        calc, rank_c = info[3], len(info[2])
        env, oid, get = self.env, op.out.id, self.get

        def run() -> None:
            res = self._mma_product(info, op.a, op.b)
            env[oid] = store_as(acc_t, get(op.c, rank_c).astype(calc, copy=False) + res)
        return run

    # ------------------------------------------------------------------ tensors
    def _window(self, tensor: str, box: tuple[int, ...]) -> np.ndarray:
        """The writable view of every box of extents ``box`` of ``tensor`` (indexed by origin)."""
        key = (tensor, box)
        win = self._windows.get(key)
        if win is None:
            t = self.tensors[tensor]
            win = as_strided(t, tuple(s - b + 1 for s, b in zip(t.shape, box)) + box, t.strides * 2)
            self._windows[key] = win
        return win

    def _box_cells(self, shape, box, origins, depth) -> tuple[list[np.ndarray], np.ndarray, tuple[int, ...]]:
        """Per-cell index arrays (batch + box, broadcastable), the in-bounds mask and the batch shape."""
        r = len(box)
        org = [_pad(np.asarray(o), depth) for o in origins]
        bshape = np.broadcast_shapes(*(o.shape for o in org)) if org else ()
        idx, mask = [], np.ones((), bool)
        for a, (o, ext) in enumerate(zip(org, box)):
            ia = o.reshape(o.shape + (1,) * r) + np.arange(ext).reshape((1,) * a + (ext,) + (1,) * (r - a - 1))
            idx.append(ia)
            mask = mask & (ia >= 0) & (ia < shape[a])
        return idx, mask, bshape

    def _oob(self, tensor: str, idx, mask, loc: Loc, what: str) -> None:
        full = np.broadcast_shapes(mask.shape, *(ia.shape for ia in idx))
        bad = np.argwhere(~np.broadcast_to(mask, full))[0]
        coords = tuple(int(np.broadcast_to(ia, full)[tuple(bad)]) for ia in idx)
        raise ExecutionError(f"{what} of {tensor} at {coords} is out of bounds {self.tensors[tensor].shape} "
                             "under bounds='assume'", loc, "use bounds='zero' or keep the box inside the tensor")

    @staticmethod
    def _in_bounds(origins, box, shape) -> bool:
        for o, b, s in zip(origins, box, shape):
            if isinstance(o, np.ndarray) and o.ndim:
                if o.size == 0 or o.min() < 0 or o.max() + b > s:
                    return False
            elif o < 0 or o + b > s:
                return False
        return True

    def recording(self, tensor: str) -> bool:
        """Whether accesses of ``tensor`` are recorded: checked mode, inside a parallel region, and a
        tensor the program writes (a cell nobody writes cannot conflict)."""
        return self.recorder is not None and self.recorder.open and tensor in self.watched

    def _note(self, tensor: str, os, box: tuple[int, ...], is_write: bool, what: str) -> None:
        """Record the box at origins ``os`` (its cells inside the tensor) for every current instance:
        one box per point of the batch axes, with that point's instance number (``self.inst``; a
        loop-fold axis carries one instance over its iterations)."""
        d = self.depth
        inst = self.inst.reshape(self.inst.shape + (1,) * (d - self.inst.ndim))
        org = [_pad(np.asarray(o, np.int64), d) for o in os]
        full = np.broadcast_shapes(inst.shape, *(o.shape for o in org))
        n = _prod(full)
        origins = np.stack([np.broadcast_to(o, full).reshape(-1) for o in org], axis=1) if org \
            else np.zeros((n, 0), np.int64)
        self.recorder.record_boxes(tensor, self.tensors[tensor].shape, origins, box, is_write, what,  # type: ignore
                                   np.broadcast_to(inst, full).reshape(-1))

    def describe_cell(self, tensor: str, cell: int) -> tuple[int, ...]:
        return tuple(int(c) for c in np.unravel_index(cell, self.tensors[tensor].shape))

    def _view(self, op: Union[ir.ViewLoad, ir.ViewStore]):
        """What loads and stores share: the tensor table, name, shape, rank, compiled origins and the box
        (constant or a function)."""
        tensors, name = self.tensors, op.tensor
        shape = tensors[name].shape
        r = len(shape)
        box_c, box_f = self._shape_fn(op.extents, "box extent", op.loc)
        return tensors, name, shape, r, [self._cx(o) for o in op.origin], box_c, box_f

    def _c_ViewLoad(self, op: ir.ViewLoad) -> Callable[[], None]:
        tensors, name, shape, r, org, box_c, box_f = self._view(op)
        scalar_out = op.out.type.rank == 0
        env, oid = self.env, op.out.id
        what = f"load at {op.loc}"

        def run() -> None:
            t = tensors[name]
            box = box_c if box_c is not None else box_f()
            os = [c if c is not None else f() for c, f in org]
            record = self.recording(name)
            vals = None
            if r and 0 not in box:
                ints, inside = _scalar_box_inside(os, box, shape)
                if ints and inside:
                    if scalar_out:
                        vals = np.array(t[tuple(os)])
                    elif r == 2:
                        o0, o1 = os
                        vals = t[o0:o0 + box[0], o1:o1 + box[1]].copy()
                    else:
                        vals = t[tuple([slice(o, o + b) for o, b in zip(os, box)])].copy()
                    if record:
                        self._note(name, os, box, False, what)
                    env[oid] = vals
                    return
                if not ints and self._in_bounds(os, box, shape):
                    if record:
                        self._note(name, os, box, False, what)
                        record = False
                    d = max(o.ndim for o in os if isinstance(o, np.ndarray))
                    ix = tuple(_pad(o, d) if isinstance(o, np.ndarray) else int(o) for o in os)
                    if all(b == 1 for b in box):
                        vals = t[ix]
                        vals = vals.reshape(vals.shape + box)
                    else:
                        vals = self._window(name, box)[ix]
            if vals is None:
                vals = self._load_general(op, t, os, box, record, what)
            if scalar_out:
                vals = vals.reshape(vals.shape[:vals.ndim - r])
            env[oid] = vals
        return run

    def _load_general(self, op: ir.ViewLoad, t: np.ndarray, os, box, record, what) -> np.ndarray:
        depth = max([getattr(o, "ndim", 0) for o in os] + [0])
        idx, mask, bshape = self._box_cells(t.shape, box, os, depth)
        r = len(box)
        if op.bounds == "assume" and not mask.all():
            self._oob(op.tensor, idx, mask, op.loc, "load")
        full = allocatable(bshape + box, t.itemsize, "a tile load (all parallel instances)", op.loc)
        mask = np.broadcast_to(mask, full)
        if record:
            self._note(op.tensor, os, box, False, what)
        if t.size == 0:
            vals = np.zeros(full, t.dtype)
        elif r == 0:
            vals = np.broadcast_to(t, full).copy()
        else:
            vals = t[tuple(np.clip(ia, 0, s - 1) for ia, s in zip(idx, t.shape))]
            vals = np.broadcast_to(vals, full)
        if op.fallback is not None:
            fill = self.get(op.fallback, 0)
        else:
            fill = np.zeros((), t.dtype)
        nb = max(len(bshape), fill.ndim)
        if fill.ndim:
            fill = fill.reshape(fill.shape + (1,) * (nb - fill.ndim) + (1,) * r)
        if nb > len(bshape):
            extra = (1,) * (nb - len(bshape))
            vals = vals.reshape(bshape + extra + box)
            mask = mask.reshape(bshape + extra + box)
        return np.where(mask, vals, fill).astype(t.dtype, copy=False)

    def _c_ViewStore(self, op: ir.ViewStore) -> Callable[[], None]:
        tensors, name, shape, r, org, box_c, box_f = self._view(op)
        vt = self.types[op.value]
        vrank = vt.rank
        used = tuple(p for p in op.perm if p is not None)
        identity = used == tuple(range(vrank))
        what = f"store at {op.loc}"
        get = self.get
        one_cell = r > 0 and vrank == 0 and box_c is not None and all(b == 1 for b in box_c)

        def run() -> None:
            t = tensors[name]
            box = box_c if box_c is not None else box_f()
            os = [c if c is not None else f() for c, f in org]
            if one_cell:  # scalar descent
                v = get(op.value, 0)
                if v.ndim == 0:
                    for o, n in zip(os, shape):
                        if isinstance(o, np.ndarray) and o.ndim or o < 0 or o >= n:
                            break
                    else:
                        if self.recording(name):
                            self._note(name, os, box, True, what)
                        t[tuple(os)] = v
                        return
            arr = get(op.value, vrank)
            d = arr.ndim - vrank
            if not identity:
                arr = arr.transpose(tuple(range(d)) + tuple(d + p for p in used))
            if vrank != r:
                it = iter(arr.shape[d:])
                arr = arr.reshape(arr.shape[:d] + tuple(next(it) if p is not None else 1 for p in op.perm))
            record = self.recording(name)
            if r and 0 not in box:
                ints, inside = _scalar_box_inside(os, box, shape)
                vbatch = arr.shape[:d]
                if ints and inside and (d == 0 or _prod(vbatch) == 1):
                    if record:
                        self._note(name, os, box, True, what)
                    t[tuple(slice(o, o + b) for o, b in zip(os, box))] = arr.reshape(arr.shape[d:]) if d else arr
                    return
                if not ints and self._in_bounds(os, box, shape):
                    if record:
                        self._note(name, os, box, True, what)
                        record = False
                    ix = tuple(_pad(o, d) if isinstance(o, np.ndarray) else int(o) for o in os)
                    bshape = np.broadcast_shapes(*(o.shape for o in ix if isinstance(o, np.ndarray)))
                    bshape = bshape + (1,) * (d - len(bshape))
                    if np.broadcast_shapes(bshape, vbatch) == bshape:  # no two instances write one box
                        if all(b == 1 for b in box):
                            t[ix] = arr.reshape(vbatch)
                        else:
                            self._window(name, box)[ix] = np.broadcast_to(arr, bshape + box)
                        return
            self._store_general(op, t, os, box, arr, d, record, what)
        return run

    def _store_general(self, op: ir.ViewStore, t: np.ndarray, os, box, arr, d, record, what) -> None:
        idx, mask, bshape = self._box_cells(t.shape, box, os, d)
        if op.bounds == "assume" and not mask.all():
            self._oob(op.tensor, idx, mask, op.loc, "store")
        full = np.broadcast_shapes(arr.shape, mask.shape, *(ia.shape for ia in idx))
        arr = np.broadcast_to(arr, full)
        mask = np.broadcast_to(mask, full)
        sel = tuple(np.broadcast_to(ia, full)[mask] for ia in idx)
        if record:
            self._note(op.tensor, os, box, True, what)
        if len(box) == 0:
            if arr.size:
                t[()] = arr.reshape(-1)[-1]
            return
        t[sel] = arr[mask]

    # ------------------------------------------------------------------ memories
    def _c_Alloc(self, op: ir.Alloc) -> Callable[[], None]:
        _, shape_f = self._shape_fn(op.type.shape, "tile extent", op.loc)
        storage = dtype_of(op.type.dtype).storage

        def run() -> None:
            self.mems[op.mem] = np.zeros(allocatable(tuple(self.batch) + shape_f(), storage.itemsize,
                                                     "a tile memory (all parallel instances)", op.loc), storage)
            self.mem_depth[op.mem] = self.depth
        return run

    def _c_MemStore(self, op: ir.MemStore) -> Callable[[], None]:
        def run() -> None:
            mem = self.mems[op.mem]
            rank = mem.ndim - self.mem_depth[op.mem]
            val = self.get(op.value, rank)
            mem[...] = np.broadcast_to(val[(0,) * (val.ndim - mem.ndim)] if val.ndim > mem.ndim else val, mem.shape)
        return run

    def _c_MemLoad(self, op: ir.MemLoad) -> Callable[[], None]:
        env, oid, mems = self.env, op.out.id, self.mems
        return lambda: env.__setitem__(oid, mems[op.mem].copy())

    # ------------------------------------------------------------------ regions
    def _static_elements(self, block: ir.Block) -> int:
        """The largest element count of a value of ``block`` whose extents are static (an estimate)."""
        n = self._static_elems.get(id(block))
        if n is None:
            n = 1
            for op in ir.walk(block):
                for v in ir.results_of(op):
                    consts = [self._cx(e)[0] for e in v.type.shape]
                    if all(c is not None for c in consts):
                        n = max(n, _prod(max(int(c), 0) for c in consts))
            self._static_elems[id(block)] = n
        return n

    def _axis_order(self, n: int) -> np.ndarray:
        return instance_order(self.order, self.rng, n)

    def batchable(self, op: Any) -> bool:
        """Extents inside the body (regions, tiles, boxes) must not read this region's coordinates."""
        if op.region not in self._batchable:
            self._batchable[op.region] = not any(
                r == op.region for e in _body_extents(op.body) for r, _ in free_vars(e))
        return self._batchable[op.region]

    def _c_Parallel(self, op: ir.Parallel) -> Callable[[], None]:
        _, ext_f = self._shape_fn(op.extents, "parallel extent", op.loc)

        def run() -> None:
            ext = ext_f()
            if _prod(ext) == 0:
                return
            if self.batchable(op):
                self._parallel_batched(op, ext)
            else:
                self._parallel_each(op, ext)
        return run

    def _parallel_batched(self, op: ir.Parallel, ext: tuple[int, ...]) -> None:
        r, d = len(ext), self.depth
        axes = [self._axis_order(e) for e in ext]
        per_row = self._static_elements(op.body) * _prod(self.batch) * _prod(ext[1:])
        chunk = max(1, BATCH_BUDGET // max(1, per_row))
        plan = self._plan(op.body)
        rec, parent, n = self.recorder, self.inst, _prod(ext)
        if rec is not None:
            rec.begin(f"parallel region r{op.region}", op.loc, Grid(axes), n)
        for lo in range(0, ext[0], chunk):
            parts = [axes[0][lo:lo + chunk]] + axes[1:]
            for a, c in enumerate(parts):
                self.coords[(op.region, a)] = c.reshape((1,) * (d + a) + (len(c),) + (1,) * (r - a - 1))
            if rec is not None:  # instance number: the enclosing one's times n plus the row-major position
                own = parent.reshape(parent.shape + (1,) * (d + r - parent.ndim)) * n
                for a, c in enumerate(parts):
                    pos = np.arange(len(c), dtype=np.int64) + (lo if a == 0 else 0)
                    own = own + pos.reshape((1,) * (d + a) + (-1,) + (1,) * (r - a - 1)) * _prod(ext[a + 1:])
                self.inst = own
            self._push(tuple(len(c) for c in parts))
            try:
                for f in plan:
                    f()
            finally:
                self._pop(r)
                self.inst = parent
        if rec is not None:
            rec.end(self.describe_cell, lift=lambda x: x // n)

    def _parallel_each(self, op: ir.Parallel, ext: tuple[int, ...]) -> None:
        n = _prod(ext)
        order = self._axis_order(n).tolist()
        rec, parent = self.recorder, self.inst
        plan = self._plan(op.body)
        coords, region, r = self.coords, op.region, len(ext)
        strides = [_prod(ext[a + 1:]) for a in range(r)]
        if rec is not None:
            rec.begin(f"parallel region r{op.region}", op.loc, group=n)
        key0 = (region, 0)
        try:
            for k, flat in enumerate(order):
                if r == 1:
                    coords[key0] = flat
                    point = (flat,)
                else:
                    point = tuple((flat // s) % e for s, e in zip(strides, ext))
                    for a, x in enumerate(point):
                        coords[(region, a)] = x
                if rec is not None:
                    rec.instance(point)
                    self.inst = parent * n + k
                for f in plan:
                    f()
        finally:
            self.inst = parent
        if rec is not None:
            rec.end(self.describe_cell, lift=lambda x: x // n)

    def _c_loop(self, op: ir.Loop, reverse: bool = False) -> Callable[[], None]:
        _, ext_f = self._shape_fn(op.extents, "loop extent", op.loc)
        ranks = [self.types[i].rank for i in op.inits]
        env = self.env

        def run() -> None:
            ext = ext_f()
            carries = [self.get(i, rk) for i, rk in zip(op.inits, ranks)]
            if _prod(ext) > 0:
                fold = self._fold(op)
                if fold is not None:
                    carries = self._loop_batched(op, ext, carries, fold, reverse)
                else:
                    carries = self._loop_each(op, ext, carries, reverse)
            for v, c in zip(op.outs, carries):
                env[v.id] = c
        return run

    def _c_Serial(self, op: ir.Serial) -> Callable[[], None]:
        return self._c_loop(op)

    def _c_Pipeline(self, op: ir.Pipeline) -> Callable[[], None]:
        return self._c_loop(op)

    def _c_Reduce(self, op: ir.Reduce) -> Callable[[], None]:
        if op.policy in ("fold_left", "fold_right"):
            return self._c_loop(op, reverse=op.policy == "fold_right")
        _, ext_f = self._shape_fn(op.extents, "reduce extent", op.loc)

        def run() -> None:
            self._tree_reduce(op, ext_f(), tree_merges(op, self._region_merges(op)))
        return run

    def _region_merges(self, op: ir.Loop) -> Optional[list[Optional[str]]]:
        if id(op) not in self._merges:
            self._merges[id(op)] = classify_updates(op, self.types)
        return self._merges[id(op)]

    def _points(self, ext: tuple[int, ...], reverse: bool):
        n = _prod(ext)
        flats = range(n - 1, -1, -1) if reverse else range(n)
        if len(ext) == 1:
            return ((f,) for f in flats)
        strides = [_prod(ext[a + 1:]) for a in range(len(ext))]
        return (tuple((f // s) % e for s, e in zip(strides, ext)) for f in flats)

    def _loop_each(self, op: ir.Loop, ext: tuple[int, ...], carries: list[np.ndarray], reverse: bool
                   ) -> list[np.ndarray]:
        env, coords, region = self.env, self.coords, op.region
        plan = self._plan(op.body)
        args = [v.id for v in op.body.args]
        yields = op.body.yields
        keys = [(region, a) for a in range(len(ext))]
        for point in self._points(ext, reverse):
            for key, x in zip(keys, point):
                coords[key] = x
            for vid, c in zip(args, carries):
                env[vid] = c
            for f in plan:
                f()
            carries = [env[y] for y in yields]
        return carries

    def _loop_holds(self, op: ir.Loop) -> bool:
        """Whether the loop's body may be evaluated for many iterations at once."""
        return self.batchable(op) and not any(isinstance(o, _NOHOLD) for o in ir.walk(op.body))

    def _fold(self, op: ir.Loop) -> Optional[_Fold]:
        """How to evaluate ``op`` over its domain at once, or None (iteration by iteration)."""
        if id(op) in self._folds:
            return self._folds[id(op)]
        fold = None
        merges = self._region_merges(op) if self._loop_holds(op) else None
        if merges is not None and any(m is not None for m in merges):
            body = op.body
            defs = {r.id: o for o in body.ops for r in ir.results_of(o)}
            updates: dict[int, Any] = {}
            carries: list[Optional[tuple[str, Any, str, bool]]] = []
            ok = True
            for arg, y, m in zip(body.args, body.yields, merges):
                if m is None:
                    carries.append(None)
                    continue
                d = defs[y]
                if isinstance(d, ir.Mma):
                    if dtype_of(arg.type.dtype).name == "bf16":
                        ok = False  # the product is rounded with the state, not on its own
                    carries.append(("mma", d, "add", False))
                else:
                    swapped = d.a != arg.id
                    carries.append(("bin", d.a if swapped else d.b, m, swapped))
                updates[id(d)] = d
            # only the updates may read a state (directly or through other values)
            dependent = {arg.id for arg, m in zip(body.args, merges) if m is not None}
            readers = set()
            for o in ir.walk(body):
                if set(ir.operands_of(o)) & dependent:
                    readers.add(id(o))
                    dependent |= {r.id for r in ir.results_of(o)}
            if ok and readers == set(updates):
                keep = set(body.yields)
                for spec in carries:
                    if spec is not None:
                        keep |= {spec[1].a, spec[1].b} if spec[0] == "mma" else {spec[1]}
                plan = self._plan_ops(body, [o for o in body.ops if id(o) not in updates], keep)
                fold = _Fold(plan, carries)
        self._folds[id(op)] = fold
        return fold

    def _loop_chunks(self, op: ir.Loop, ext: tuple[int, ...], reverse: bool) -> list[tuple[np.ndarray, ...]]:
        """The loop's domain in order, in chunks small enough to evaluate at once: per chunk,
        the coordinate arrays of its points (one per axis)."""
        n, r = _prod(ext), len(ext)
        order = np.arange(n - 1, -1, -1) if reverse else np.arange(n)
        per_iter = self._static_elements(op.body) * _prod(self.batch)
        chunk = max(1, BATCH_BUDGET // max(1, per_iter))
        out = []
        for lo in range(0, n, chunk):
            sel = order[lo:lo + chunk]
            out.append(tuple(np.unravel_index(sel, ext)) if r > 1 else (sel,))
        return out

    def _enter_chunk(self, op: ir.Loop, parts: tuple[np.ndarray, ...]) -> int:
        """Bind the loop's coordinates to one chunk and open its batch axis (close with ``_pop(1)``)."""
        d, size = self.depth, len(parts[0])
        for a, c in enumerate(parts):
            self.coords[(op.region, a)] = c.reshape((1,) * d + (size,))
        self._push((size,))
        return size

    def _loop_batched(self, op: ir.Loop, ext: tuple[int, ...], carries: list[np.ndarray], fold: _Fold,
                      reverse: bool) -> list[np.ndarray]:
        env, d = self.env, self.depth
        args = op.body.args
        accs = list(carries)
        for parts in self._loop_chunks(op, ext, reverse):
            size = self._enter_chunk(op, parts)
            try:
                for v, c in zip(args, accs):
                    env[v.id] = c
                for f in fold.plan:
                    f()
                contribs: list[Optional[np.ndarray]] = []
                for v, spec in zip(args, fold.carries):
                    if spec is None:
                        contribs.append(None)
                    elif spec[0] == "mma":
                        contribs.append(self._mma_product(self._mma_info(spec[1]), spec[1].a, spec[1].b))
                    else:
                        contribs.append(self.get(spec[1], v.type.rank))
            finally:
                self._pop(1)
            for j, (v, spec) in enumerate(zip(args, fold.carries)):
                if spec is not None:
                    ufunc = np.subtract if spec[2] == "sub" else MERGE[spec[2]]
                    moved = np.moveaxis(contribs[j], d, 0)  # a loop-invariant contribution has extent 1 here
                    accs[j] = _fold_in_order(accs[j], np.broadcast_to(moved, (size,) + moved.shape[1:]), ufunc,
                                             spec[3], dtype_of(v.type.dtype))
        return accs

    def _tree_reduce(self, op: ir.Reduce, ext: tuple[int, ...], merges: list[Optional[str]]) -> None:
        """Evaluate each iteration's contribution with the states at their identity, then merge by policy."""
        inits = [self.get(i, self.types[i].rank) for i in op.inits]
        ids = []
        for v, m in zip(op.body.args, merges):
            dt = dtype_of(v.type.dtype)
            ids.append(np.asarray(identity(m, dt), dt.storage) if m else None)
        args = tuple(ids[j] if merges[j] else inits[j] for j in range(len(inits)))
        n = _prod(ext)
        items_of: list[Optional[np.ndarray]] = [None] * len(inits)
        if n and self._loop_holds(op):
            d = self.depth
            chunks: list[list[np.ndarray]] = [[] for _ in inits]
            for parts in self._loop_chunks(op, ext, False):
                size = self._enter_chunk(op, parts)
                try:
                    self.block(op.body, args)
                    for j, (v, y) in enumerate(zip(op.body.args, op.body.yields)):
                        if merges[j]:
                            moved = np.moveaxis(self.get(y, v.type.rank), d, 0)
                            chunks[j].append(np.broadcast_to(moved, (size,) + moved.shape[1:]))
                finally:
                    self._pop(1)
            for j in range(len(inits)):
                if merges[j]:
                    shape = np.broadcast_shapes(*(c.shape[1:] for c in chunks[j]))
                    items_of[j] = np.concatenate([np.broadcast_to(c, c.shape[:1] + shape) for c in chunks[j]])
        elif n:
            contributions: list[list[np.ndarray]] = [[] for _ in op.inits]
            coords, region = self.coords, op.region
            for point in self._points(ext, False):
                for a, x in enumerate(point):
                    coords[(region, a)] = x
                ys = self.block(op.body, args)
                for j, y in enumerate(ys):
                    contributions[j].append(y)
            for j in range(len(inits)):
                if merges[j]:
                    items_of[j] = np.stack(np.broadcast_arrays(*contributions[j]))
        for j, v in enumerate(op.outs):
            m = merges[j]
            if m is None or items_of[j] is None:
                self.env[v.id] = inits[j]
                continue
            dt = dtype_of(v.type.dtype)
            items = items_of[j]
            seed = inits[j]
            ufunc = MERGE["add" if m == "sub" else m]
            merge = self._ufunc_merge(ufunc, dt)
            seed_b = np.broadcast_to(seed, np.broadcast_shapes(seed.shape, items.shape[1:]))
            items = np.broadcast_to(items, (items.shape[0],) + seed_b.shape)
            self.env[v.id] = combine(seed_b, items, merge, op.policy, self.adversarial, self.rng)

def _contract(am: np.ndarray, bm: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
    """``am @ bm`` (matrices in the last two axes) with every float element summed strictly in
    contracted-index order, ``(((a0 b0) + a1 b1) + a2 b2) + ...``, each product and sum rounded
    in the operands' dtype. So one element's bits depend on its row and column only, never on
    how many rows, columns or batches share the call (a BLAS matmul blocks and fuses by shape,
    which made the batched and instance-by-instance results differ). Integer products wrap
    the same way in every order, so they keep ``matmul``."""
    if am.dtype.kind != "f":
        return np.matmul(am, bm, out=out)
    shape = np.broadcast_shapes(am.shape[:-2], bm.shape[:-2]) + (am.shape[-2], bm.shape[-1])
    acc = out if out is not None else np.empty(shape, am.dtype)
    k = am.shape[-1]
    if k == 0:
        acc[...] = 0
        return acc
    cols = np.ascontiguousarray(np.swapaxes(am, -1, -2))[..., None]  # (..., k, rows, 1)
    rows = bm[..., None, :]  # (..., k, 1, cols)
    np.multiply(cols[..., 0, :, :], rows[..., 0, :, :], out=acc)
    term = np.empty_like(acc)
    for j in range(1, k):
        np.multiply(cols[..., j, :, :], rows[..., j, :, :], out=term)
        np.add(acc, term, out=acc)
    return acc


def _into(buf: list, slot: int, x: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``x`` reshaped to ``shape``: a view when that needs no copy, else a copy into ``buf[slot]``."""
    if x.flags.c_contiguous:
        return x.reshape(shape)
    if buf[slot] is None:
        buf[slot] = np.empty(shape, x.dtype)
    np.copyto(buf[slot].reshape(x.shape), x)
    return buf[slot]


def _mma_plan(sa: str, sb: str, out: str, ashape: tuple[int, ...], bshape: tuple[int, ...], d: int) -> tuple:
    """Transposes and reshapes that turn ``mma`` operands of these shapes into one ``matmul``."""
    size = {**dict(zip(sa, ashape[d:])), **dict(zip(sb, bshape[d:]))}
    lb = [x for x in sa if x in sb and x in out]
    lm = [x for x in sa if x not in sb]
    lk = [x for x in sa if x in sb and x not in out]
    ln = [x for x in sb if x not in sa]
    shared, aonly, bonly = [], [], []
    for i in range(d):
        if ashape[i] != 1 and bshape[i] != 1:
            shared.append(i)
        elif ashape[i] != 1:
            aonly.append(i)
        elif bshape[i] != 1:
            bonly.append(i)
    a_axes = shared + [d + sa.index(x) for x in lb] + aonly + [d + sa.index(x) for x in lm] + \
        [d + sa.index(x) for x in lk]
    b_axes = shared + [d + sb.index(x) for x in lb] + [d + sb.index(x) for x in lk] + bonly + \
        [d + sb.index(x) for x in ln]
    pa = [i for i in range(len(ashape)) if i not in a_axes] + a_axes
    pb = [i for i in range(len(bshape)) if i not in b_axes] + b_axes
    gb = _prod(ashape[i] for i in shared) * _prod(size[x] for x in lb)
    gm = _prod(ashape[i] for i in aonly) * _prod(size[x] for x in lm)
    gk = _prod(size[x] for x in lk)
    gn = _prod(bshape[i] for i in bonly) * _prod(size[x] for x in ln)
    two_d = gb == 1
    ra = (gm, gk) if two_d else (gb, gm, gk)
    rb = (gk, gn) if two_d else (gb, gk, gn)
    labels = [("B", i) for i in shared] + [("L", x) for x in lb] + [("B", i) for i in aonly] + \
        [("L", x) for x in lm] + [("B", i) for i in bonly] + [("L", x) for x in ln]
    sizes = tuple([ashape[i] for i in shared] + [size[x] for x in lb] + [ashape[i] for i in aonly] +
                  [size[x] for x in lm] + [bshape[i] for i in bonly] + [size[x] for x in ln])
    pr = [labels.index(("B", i)) for i in range(d) if ("B", i) in labels] + [labels.index(("L", x)) for x in out]
    final = tuple(ashape[i] if ashape[i] != 1 else bshape[i] for i in range(d)) + tuple(size[x] for x in out)
    ident = lambda p: None if p == list(range(len(p))) else tuple(p)  # noqa: E731
    buf = [None, None, None] if gb * gm * gn >= 1 << 15 else None
    return (ident(pa), ra, ident(pb), rb, two_d, None if sizes == (ra[-2], rb[-1]) and two_d else sizes,
            ident(pr), final, buf)


def _order_free_reduce(ufunc: np.ufunc, dt: DType, seed: np.ndarray, items: np.ndarray) -> Optional[np.ndarray]:
    """``merge(seed, items...)`` along the last axis by one ufunc reduction, when every
    order of the merges gives the same bits; None when this cannot be told."""
    r = ufunc.reduce(items, axis=-1, dtype=items.dtype)
    if dt.is_float:
        if np.isnan(seed).any():
            return None
        if ufunc in (MERGE["max"], MERGE["min"]):
            if np.isnan(r).any() or (r == 0).any():  # a NaN's payload and a zero's sign depend on the order
                return None
        else:
            return None
    return store_as(dt, ufunc(seed, r))


def _fold_in_order(acc: np.ndarray, items: np.ndarray, ufunc: np.ufunc, swapped: bool, dt: DType) -> np.ndarray:
    """``acc`` updated by ``items`` (axis 0) strictly in order: ``acc = ufunc(acc, x)`` (``ufunc(x, acc)``
    when ``swapped``), each step rounded to ``dt`` exactly as the iteration-by-iteration loop does."""
    n = items.shape[0]
    full = np.broadcast_shapes(acc.shape, items.shape[1:])
    items = np.broadcast_to(items, (n,) + full)
    acc = np.broadcast_to(acc, full)
    # fold in the items' memory order (contiguous adds), then restore the axis order
    perm = sorted(range(len(full)), key=lambda a: -abs(items.strides[a + 1]))
    if perm != list(range(len(full))):
        inv = np.argsort(perm)
        out = _fold_in_order(acc.transpose(perm), items.transpose([0] + [a + 1 for a in perm]), ufunc, swapped, dt)
        return out.transpose(inv)
    st = dt.storage
    if dt.name == "bf16":
        out = np.broadcast_to(acc, full)
        for i in range(n):
            out = store_as(dt, ufunc(items[i], out) if swapped else ufunc(out, items[i]))
        return out
    if swapped and items.dtype.kind in "fc" or n <= 16:
        out = np.array(np.broadcast_to(acc, full), dtype=st, order="C")
        for i in range(n):
            if swapped:
                ufunc(items[i], out, out=out)
            else:
                ufunc(out, items[i], out=out)
        return out
    stacked = np.concatenate([np.broadcast_to(acc, full)[None].astype(st, copy=False), items.astype(st, copy=False)])
    return ufunc.accumulate(stacked, axis=0, dtype=st)[-1]


def _reads(op: Any) -> set[int]:
    """Every value id ``op`` reads, inside its nested blocks too (bodies, reducers, yields)."""
    ids = set(ir.operands_of(op))
    for blk in (getattr(op, "body", None), getattr(op, "fn", None)):
        if isinstance(blk, ir.Block):
            ids |= set(blk.yields)
            for inner in blk.ops:
                ids |= _reads(inner)
    return ids


def _body_extents(block: ir.Block):
    for op in ir.walk(block):
        for v in ir.results_of(op):
            yield from v.type.shape
        yield from getattr(op, "extents", ())
        if isinstance(op, ir.Alloc):
            yield from op.type.shape


def interpret(p: ir.Program, order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical",
              checked: bool = True, **arrays_and_sizes: Any) -> dict[str, np.ndarray]:
    """Run ``p``; returns the written tensors by name (copies: the caller's arrays never change)."""
    check_modes(p, order, reduce_mode)
    arrays, sizes = prepare_inputs(p, arrays_and_sizes)
    key = (id(p), tuple(sorted(sizes.items())), bool(checked))
    it = _COMPILED.pop(key, None)
    if it is None or it.p is not p:
        it = Interpreter(p, sizes, arrays, order=order, seed=seed, reduce_mode=reduce_mode, checked=checked)
    else:
        it.reset(arrays, order=order, seed=seed, reduce_mode=reduce_mode)
    try:
        it.run()
    finally:
        it.reset({})
        _COMPILED[key] = it  # reused by the next run of this program with these sizes
        while len(_COMPILED) > _COMPILED_MAX:
            _COMPILED.pop(next(iter(_COMPILED)))
    return {name: arrays[name] for name in p.outputs}


# Compiled interpreters by (program, sizes, checked): compiling a program's blocks (closures,
# folded index expressions, loop analyses) costs about as much as running a small kernel.
_COMPILED: dict[tuple, Interpreter] = {}
_COMPILED_MAX = 32


__all__ = ["interpret", "Interpreter", "TilecertError", "ORDERS", "REDUCE_MODES"]
