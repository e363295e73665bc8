"""The reference interpreter: the meaning of a tile program, op by op, as literally as possible.

An environment maps value ids to numpy arrays (a tile's shape, in its dtype's storage, every
result rounded by ``store_as``); ``RULES`` holds one small function per IR op, which reads
its operands from the environment and writes its result. A block binds its arguments, runs
its ops in order and returns its yields. Regions:

- ``parallel``: instances one by one, in the chosen order over the row-major flattening of
  the domain (canonical, reverse, or a permutation drawn from the seeded generator);
- ``serial``, ``pipeline`` and ``reduce`` with ``fold_left``: iterations in lexicographic
  order, each body run on the previous iteration's states; ``fold_right`` in reverse order;
- ``reduce`` with a tree policy: each iteration's contribution is its update with the
  states at the merge's identity, and the contributions are combined by ``reduction.combine``
  (the canonical balanced tree, or a random one in adversarial mode);
- ``mma``: products summed strictly in contracted-index order, ``((p0 + p1) + p2) + ...``,
  in the accumulator's calc dtype, then added to the accumulator.

Loads and stores touch exactly the cells of their box inside the tensor (``bounds='zero'``
masks the rest: a load reads the fallback there, a store skips them; ``bounds='assume'``
makes any cell outside an ``ExecutionError``). In checked mode each execution of a parallel
region is a scope of ``conflicts.Recorder`` and every cell a load or store touches is
recorded with its instance: two instances touching one cell, one writing it, raise
``NoninterferenceError``. ``interp_fast`` computes the same results in batches.
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Mapping, Optional

import numpy as np

from . import ir
from .conflicts import Recorder
from .dtypes import dtype_of, store_as
from .errors import ExecutionError, InputError, Loc
from .index import IExpr, evaluate
from .inputs import prepare_inputs
from .limits import allocatable
from .reduction import classify_updates, combine, tree_merges
from .typing_rules import align_axes
from .ufuncs import BINARY, MERGE, UNARY, identity

ORDERS = ("canonical", "reverse", "shuffle")
REDUCE_MODES = ("canonical", "adversarial")


def check_modes(p: ir.Program, order: str, reduce_mode: str) -> None:
    """Refuse an unknown instance order or reduce mode (``InputError``)."""
    if order not in ORDERS:
        raise InputError(f"unknown order {order!r}", p.loc, f"use one of {ORDERS}")
    if reduce_mode not in REDUCE_MODES:
        raise InputError(f"unknown reduce_mode {reduce_mode!r}", p.loc, f"use one of {REDUCE_MODES}")


def type_table(p: ir.Program) -> dict[int, ir.TileType]:
    """The type of every value of ``p`` (op results, block arguments, reducer bodies)."""
    table: dict[int, ir.TileType] = {}
    for op in ir.walk(p.body):
        for v in ir.results_of(op):
            table[v.id] = v.type
        for blk in (getattr(op, "body", None), getattr(op, "fn", None)):
            if isinstance(blk, ir.Block):
                table.update({v.id: v.type for v in blk.args})
                if blk is getattr(op, "fn", None):
                    table.update({v.id: v.type for inner in ir.walk(blk) for v in ir.results_of(inner)})
    return table


def instance_order(order: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """The positions ``0..n-1`` in the order instances run."""
    if order == "reverse":
        return np.arange(n - 1, -1, -1)
    if order == "shuffle":
        return rng.permutation(n)
    return np.arange(n)


def contract(spec: str, a: np.ndarray, b: np.ndarray, calc: np.dtype) -> np.ndarray:
    """``mma``'s product for ``spec`` (``"ik,kj->ij"``): for each output cell, the products over the
    contracted labels (those of both operands missing from the output, row-major in ``a``'s label
    order) summed strictly in that order, each product and sum rounded in ``calc``."""
    ins, out = spec.split("->")
    sa, sb = ins.split(",")
    size = {**dict(zip(sa, a.shape)), **dict(zip(sb, b.shape))}
    ks = [x for x in sa if x in sb and x not in out]
    a, b = a.astype(calc, copy=False), b.astype(calc, copy=False)

    def laid_out(x: np.ndarray, labels: str, at: dict[str, int]) -> np.ndarray:
        x = x[tuple(at.get(lab, slice(None)) for lab in labels)]
        kept = [lab for lab in labels if lab not in at]
        x = x.transpose(sorted(range(len(kept)), key=lambda i: out.index(kept[i])))
        return x.reshape(tuple(size[lab] if lab in kept else 1 for lab in out))

    acc: Optional[np.ndarray] = None
    for point in itertools.product(*(range(size[k]) for k in ks)):
        at = dict(zip(ks, point))
        term = laid_out(a, sa, at) * laid_out(b, sb, at)
        acc = term if acc is None else acc + term
    shape = tuple(size[lab] for lab in out)
    return np.zeros(shape, calc) if acc is None else np.broadcast_to(acc, shape)


class Reference:
    """One run of a program: the environment, loop coordinates, memories and the recorder."""

    def __init__(self, p: ir.Program, sizes: Mapping[str, int], tensors: dict[str, np.ndarray], *,
                 order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical",
                 checked: bool = True) -> None:
        self.p, self.sizes, self.tensors, self.order = p, dict(sizes), tensors, order
        self.rng = np.random.default_rng(seed)
        self.adversarial = reduce_mode == "adversarial"
        self.recorder = Recorder() if checked else None
        self.types = type_table(p)
        self.env: dict[int, np.ndarray] = {}
        self.coords: dict[tuple[int, int], int] = {}
        self.mems: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------------ environment
    def read(self, vid: int) -> np.ndarray:
        return self.env[vid]

    def write(self, v: ir.Value, x: Any) -> None:
        self.env[v.id] = store_as(dtype_of(v.type.dtype), np.asarray(x))

    def index(self, e: IExpr) -> int:
        return int(evaluate(e, self.sizes, self.coords))

    def extents(self, exprs: tuple[IExpr, ...], what: str, loc: Loc) -> tuple[int, ...]:
        out = tuple(self.index(e) for e in exprs)
        for e, n in zip(exprs, out):
            if n < 0:
                raise ExecutionError(f"{what} {e} evaluates to {n} < 0", loc, "check the sizes")
        return out

    def aligned(self, vid: int, dst: ir.TileType) -> np.ndarray:
        """Value ``vid`` laid out in ``dst``'s axis order (its missing dims as unit axes)."""
        perm, missing = align_axes(self.types[vid], dst)
        x = self.read(vid)
        return np.expand_dims(x if perm == tuple(range(len(perm))) else x.transpose(perm), missing)

    def block(self, blk: ir.Block, args: tuple[np.ndarray, ...] = ()) -> tuple[np.ndarray, ...]:
        for v, a in zip(blk.args, args):
            self.env[v.id] = a
        for op in blk.ops:
            RULES[type(op)](self, op)
        return tuple(self.env[y] for y in blk.yields)

    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.p.body)

    # ------------------------------------------------------------------ tensor boxes
    def box(self, op: Any, what: str) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
        """A load's or store's tensor, the index arrays of its box's cells and the in-bounds mask;
        under ``bounds='assume'`` a cell outside is an ``ExecutionError``; in checked mode the cells
        inside are recorded."""
        t = self.tensors[op.tensor]
        org = [self.index(o) for o in op.origin]
        box = allocatable(self.extents(op.extents, "box extent", op.loc), t.itemsize, f"a tile {what}", op.loc)
        idx = tuple(o + np.arange(n).reshape((1,) * a + (n,) + (1,) * (len(box) - a - 1))
                    for a, (o, n) in enumerate(zip(org, box)))
        mask = np.ones(box, bool)
        for ia, n in zip(idx, t.shape):
            mask = mask & (ia >= 0) & (ia < n)
        if op.bounds == "assume" and not mask.all():
            bad = np.argwhere(~mask)[0]
            raise ExecutionError(f"{what} of {op.tensor} at {tuple(int(o + x) for o, x in zip(org, bad))} is out of "
                                 f"bounds {t.shape} under bounds='assume'", op.loc,
                                 "use bounds='zero' or keep the box inside the tensor")
        if self.recorder is not None and self.recorder.open and mask.any():
            sel = tuple(np.broadcast_to(ia, box)[mask] for ia in idx)
            cells = np.ravel_multi_index(sel, t.shape) if box else np.zeros(1, np.int64)
            self.recorder.record(op.tensor, cells, what == "store", f"{what} at {op.loc}")
        return t, idx, mask

    def describe_cell(self, tensor: str, cell: int) -> tuple[int, ...]:
        return tuple(int(c) for c in np.unravel_index(cell, self.tensors[tensor].shape))

    # ------------------------------------------------------------------ regions
    def points(self, ext: tuple[int, ...], order: np.ndarray):
        """The domain points at the given row-major positions, in that order."""
        for flat in order.tolist():
            yield tuple(int(c) for c in np.unravel_index(flat, ext))

    def enter(self, region: int, point: tuple[int, ...]) -> None:
        for a, x in enumerate(point):
            self.coords[(region, a)] = x


def _full(it: Reference, op: ir.Full) -> None:
    dt = dtype_of(op.out.type.dtype)
    it.write(op.out, np.full(allocatable(it.extents(op.out.type.shape, "tile extent", op.loc), dt.storage.itemsize,
                                         "a tc.full tile", op.loc), op.value))


def _iota(it: Reference, op: ir.Iota) -> None:
    shape = it.extents(op.out.type.shape, "tile extent", op.loc)
    r = np.arange(shape[op.axis]).reshape((1,) * op.axis + (-1,) + (1,) * (len(shape) - op.axis - 1))
    it.write(op.out, np.broadcast_to(r, shape))


def _binary(it: Reference, op: ir.Binary) -> None:
    a, b = it.aligned(op.a, op.out.type), it.aligned(op.b, op.out.type)
    if op.fn in ("floordiv", "mod") and np.any(b == 0):
        raise ExecutionError(f"integer {op.fn} by zero", op.loc, "guard the divisor with tc.where")
    it.write(op.out, BINARY[op.fn](a, b))


def _select(it: Reference, op: ir.Select) -> None:
    t = op.out.type
    it.write(op.out, np.where(it.aligned(op.cond, t), it.aligned(op.a, t), it.aligned(op.b, t)))


def _reshape(it: Reference, op: ir.Reshape) -> None:
    x, new = it.read(op.x), it.extents(op.out.type.shape, "tile extent", op.loc)
    if x.size != math.prod(new):
        raise ExecutionError(f"reshape of {x.shape} into {new}", op.loc, "keep the element count")
    it.env[op.out.id] = x.reshape(new)


def _reduce_expr(it: Reference, op: ir.ReduceExpr) -> None:
    """The reduced axes flattened row-major into one, combined by the policy from the seed (the init,
    or the combiner's identity)."""
    x = it.read(op.x)
    dt = dtype_of(it.types[op.x].dtype)
    keep = [i for i in range(x.ndim) if i not in op.axes]
    items = x.transpose(keep + list(op.axes)).reshape(tuple(x.shape[i] for i in keep) + (-1,))
    if op.combiner == "custom":
        assert op.fn is not None
        fn = op.fn
        merge: Callable = lambda a, b: store_as(dt, it.block(fn, (np.asarray(a), np.asarray(b)))[0])  # noqa: E731
    else:
        ufunc = MERGE[op.combiner]
        merge = lambda a, b: store_as(dt, ufunc(a, b))  # noqa: E731
    seed = it.read(op.init) if op.init is not None else np.asarray(identity(op.combiner, dt), dt.storage)
    it.write(op.out, combine(store_as(dt, seed), items, merge, op.policy, it.adversarial, it.rng, axis=-1))


def _mma(it: Reference, op: ir.Mma) -> None:
    acc = dtype_of(op.out.type.dtype)
    calc = np.dtype(np.float32) if acc.name == "bf16" else acc.storage
    it.write(op.out, it.read(op.c).astype(calc, copy=False) + contract(op.spec, it.read(op.a), it.read(op.b), calc))


def _view_load(it: Reference, op: ir.ViewLoad) -> None:
    t, idx, mask = it.box(op, "load")
    if t.size == 0 or not mask.any():
        vals = np.zeros(mask.shape, t.dtype)
    else:
        vals = t[tuple(np.clip(ia, 0, n - 1) for ia, n in zip(idx, t.shape))] if idx else t.copy()
    fill = it.read(op.fallback) if op.fallback is not None else np.zeros((), t.dtype)
    vals = np.where(mask, vals, fill).astype(t.dtype, copy=False)
    it.env[op.out.id] = vals.reshape(()) if op.out.type.rank == 0 else vals


def _view_store(it: Reference, op: ir.ViewStore) -> None:
    """The value's axes go to the box axes ``perm`` names (unit axes elsewhere), broadcast to the box;
    the cells inside the tensor are written."""
    t, idx, mask = it.box(op, "store")
    arr = it.read(op.value).transpose([p for p in op.perm if p is not None])
    dims = iter(arr.shape)
    arr = np.broadcast_to(arr.reshape(tuple(next(dims) if p is not None else 1 for p in op.perm)), mask.shape)
    if not idx:
        if arr.size:
            t[()] = arr.reshape(-1)[-1]
        return
    t[tuple(np.broadcast_to(ia, mask.shape)[mask] for ia in idx)] = arr[mask]


def _alloc(it: Reference, op: ir.Alloc) -> None:
    storage = dtype_of(op.type.dtype).storage
    it.mems[op.mem] = np.zeros(allocatable(it.extents(op.type.shape, "tile extent", op.loc), storage.itemsize,
                                           "a tile memory", op.loc), storage)


def _mem_store(it: Reference, op: ir.MemStore) -> None:
    mem = it.mems[op.mem]
    mem[...] = np.broadcast_to(it.read(op.value), mem.shape)


def _parallel(it: Reference, op: ir.Parallel) -> None:
    ext = it.extents(op.extents, "parallel extent", op.loc)
    n, rec = math.prod(ext), it.recorder
    if n == 0:
        return
    if rec is not None:
        rec.begin(f"parallel region r{op.region}", op.loc)
    for point in it.points(ext, instance_order(it.order, it.rng, n)):
        if rec is not None:
            rec.instance(point)
        it.enter(op.region, point)
        it.block(op.body)
    if rec is not None:
        rec.end(it.describe_cell)


def _loop(it: Reference, op: Any) -> None:
    """A serial, pipeline or fold reduce region: the states through its iterations in order."""
    ext = it.extents(op.extents, "loop extent", op.loc)
    states = tuple(it.read(i) for i in op.inits)
    order = np.arange(math.prod(ext))
    for point in it.points(ext, order[::-1] if getattr(op, "policy", "") == "fold_right" else order):
        it.enter(op.region, point)
        states = it.block(op.body, states)
    for v, s in zip(op.outs, states):
        it.env[v.id] = s


def _reduce(it: Reference, op: ir.Reduce) -> None:
    """Fold policies iterate (``_loop``); a tree combines per-iteration contributions by the policy."""
    if op.policy in ("fold_left", "fold_right"):
        return _loop(it, op)
    merges = tree_merges(op, classify_updates(op, it.types))
    ext = it.extents(op.extents, "reduce extent", op.loc)
    inits = [it.read(i) for i in op.inits]
    args = tuple(np.asarray(identity(m, dtype_of(v.type.dtype)), dtype_of(v.type.dtype).storage) if m else init
                 for v, m, init in zip(op.body.args, merges, inits))
    contributions: list[list[np.ndarray]] = [[] for _ in inits]
    for point in it.points(ext, np.arange(math.prod(ext))):
        it.enter(op.region, point)
        for j, y in enumerate(it.block(op.body, args)):
            contributions[j].append(y)
    for v, m, init, items in zip(op.outs, merges, inits, contributions):
        if m is None or not items:
            it.env[v.id] = init
            continue
        dt, ufunc = dtype_of(v.type.dtype), MERGE["add" if m == "sub" else m]
        stacked = np.stack(np.broadcast_arrays(*items))
        seed = np.broadcast_to(init, np.broadcast_shapes(init.shape, stacked.shape[1:]))
        stacked = np.broadcast_to(stacked, (len(items),) + seed.shape)
        it.env[v.id] = combine(seed, stacked, lambda a, b: store_as(dt, ufunc(a, b)), op.policy, it.adversarial,
                               it.rng)


RULES: dict[type, Callable[[Reference, Any], None]] = {
    ir.Full: _full,
    ir.Iota: _iota,
    ir.IndexValue: lambda it, op: it.write(op.out, it.index(op.expr)),
    ir.Cast: lambda it, op: it.write(op.out, it.read(op.x)),
    ir.Unary: lambda it, op: it.write(op.out, UNARY[op.fn](it.read(op.x))),
    ir.Binary: _binary,
    ir.Select: _select,
    ir.Reshape: _reshape,
    ir.ReduceExpr: _reduce_expr,
    ir.Mma: _mma,
    ir.ViewLoad: _view_load,
    ir.ViewStore: _view_store,
    ir.Alloc: _alloc,
    ir.MemStore: _mem_store,
    ir.MemLoad: lambda it, op: it.env.__setitem__(op.out.id, it.mems[op.mem].copy()),
    ir.Stage: lambda it, op: None,
    ir.Parallel: _parallel,
    ir.Serial: _loop,
    ir.Pipeline: _loop,
    ir.Reduce: _reduce,
}


def interpret(p: ir.Program, order: str = "canonical", seed: int = 0, reduce_mode: str = "canonical",
              checked: bool = True, **arrays_and_sizes: Any) -> dict[str, np.ndarray]:
    """Run ``p`` literally; returns the written tensors by name (copies: the caller's arrays never change)."""
    check_modes(p, order, reduce_mode)
    arrays, sizes = prepare_inputs(p, arrays_and_sizes)
    Reference(p, sizes, arrays, order=order, seed=seed, reduce_mode=reduce_mode, checked=checked).run()
    return {name: arrays[name] for name in p.outputs}


__all__ = ["interpret", "Reference", "RULES", "ORDERS", "REDUCE_MODES"]
