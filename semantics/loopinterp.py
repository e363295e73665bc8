"""The reference interpreter for loop form.

Loops run SIMT-style over *batch axes*. A loop is *concurrent* when its kind is parallel or
it carries a hardware binding (grid, block, warp, lane, vector, core, whatever its kind);
its instances follow the chosen order (canonical, reverse, seeded shuffle), in a batch or
one after another. Lockstep loops (bound to block, warp, lane or vector), parallel loops
and every concurrent loop inside a batched concurrent one run as a batch: all active
instances reach each statement together. Any other concurrent loop runs its instances one
by one (so a serial loop bound to core or grid runs its iterations in the chosen order,
not as a recurrence). A reduce loop
runs as a batch when its iterations interact only through ``Accum`` (updates are applied
with ``ufunc.at`` in batch order, which every policy admits); serial and pipeline loops
iterate. A loop's extent may depend on a batched coordinate (a thread-dependent trip
count): it runs to the largest active extent with the iterations past each instance's own
masked off; a negative extent is an ``ExecutionError``. ``If`` narrows the activity mask
and a ``Sel`` evaluates each branch only where it is chosen (an out-of-bounds load, or one
from an empty buffer, in a lane that does not take its branch is not an access).

Barriers are the lockstep points: a barrier reached by some participants of a bound scope
(block, warp, lane loops) and not others is an ``ExecutionError`` naming them.

Checked mode records every buffer cell each instance of a concurrent loop touches with the
conflict recorder (``conflicts``): a cell written by one instance and accessed by another
raises ``NoninterferenceError`` naming both instances (their loop coordinates; a lockstep
group's instances by the coordinates of all its concurrent loops), the cell and both
accesses. A barrier ends a phase of the batched scopes it synchronizes (a block barrier:
the block, warp and lane loops around it; a warp barrier: the lane loops), so accesses it
separates are not compared; the end of a loop likewise orders its instances before what
follows, as sibling loops run one after the other.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

import numpy as np

from . import ir
from . import loopir as L
from .bindings import PARTICIPANTS, SCOPES, THREAD_SCOPES
from .conflicts import Grid, Recorder
from .dtypes import dtype_of, store_as
from .errors import ExecutionError, Loc
from .index import IExpr, evaluate
from .interp_fast import _pad
from .limits import allocatable, check_allocation
from .ufuncs import BINARY, MERGE, UNARY

LOCKSTEP = THREAD_SCOPES + ("vector",)  # bindings whose instances run statement by statement together


class LoopInterpreter:
    def __init__(self, p: ir.Program, sizes: Mapping[str, int], tensors: dict[str, np.ndarray], *,
                 order: str = "canonical", seed: int = 0, checked: bool = True) -> None:
        self.p = p
        self.sizes = dict(sizes)
        self.bufs: dict[str, tuple[np.ndarray, int]] = {name: (arr, 0) for name, arr in tensors.items()}
        self.dtypes = {t.name: t.dtype for t in p.tensors}
        self.order = order
        self.rng = np.random.default_rng(seed)
        self.checked = checked
        self.coords: dict[tuple[int, int], Any] = {}
        self.batch: list[int] = []
        self.batch_loops: list[L.Loop] = []
        self.batch_conc: list[bool] = []  # per batch axis: whether its loop is concurrent
        self.mask: Any = True
        self.recorder = Recorder() if checked else None
        self.scope_info: list[Optional[_BatchScope]] = []  # per recorder scope: None for one-by-one instances
        self._batchable: dict[int, bool] = {}
        self.decl_scope: dict[str, int] = {}  # checked mode: the parallel scope depth that owns a buffer

    @property
    def depth(self) -> int:
        return len(self.batch)

    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.p.body)

    def block(self, block: ir.Block) -> None:
        """Run ``block``'s statements in order. Names resolve lexically, as the checker's model and the
        backends resolve them: a ``Decl`` shadowing a visible buffer (a tensor, an enclosing or earlier
        declaration) is visible to the rest of this block only, and the shadowed one again after it."""
        shadowed: dict[str, tuple] = {}
        for st in block.ops:
            if isinstance(st, L.Decl) and st.buf.name in self.bufs and st.buf.name not in shadowed:
                shadowed[st.buf.name] = self.binding(st.buf.name)
            getattr(self, "st_" + type(st).__name__)(st)
        for name, state in shadowed.items():
            self.rebind(name, state)

    def binding(self, name: str) -> tuple:
        """What the visible buffer ``name`` is bound to (its storage, dtype, owning scope)."""
        return self.bufs[name], self.dtypes[name], self.decl_scope.get(name)

    def rebind(self, name: str, state: tuple) -> None:
        """Make ``name`` denote the buffer ``state`` (from ``binding``) again."""
        self.bufs[name], self.dtypes[name], scope = state
        if scope is None:
            self.decl_scope.pop(name, None)
        else:
            self.decl_scope[name] = scope

    def idx(self, e: IExpr) -> Any:
        """Evaluate an index expression; batched coordinates get trailing unit axes up to the depth."""
        d = self.depth
        coords = {k: v.reshape(v.shape + (1,) * (d - v.ndim)) if isinstance(v, np.ndarray) and v.ndim < d else v
                  for k, v in self.coords.items()}
        return evaluate(e, self.sizes, coords)

    def full_mask(self) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.mask, bool), tuple(self.batch))

    # ------------------------------------------------------------------ buffers
    def st_Decl(self, st: L.Decl) -> None:
        extents = [self.idx(s) for s in st.buf.shape]
        if any(np.min(e) < 0 for e in extents if np.size(e)):  # some instance's extent is negative
            check_allocation(tuple(int(np.min(e)) for e in extents), 0, f"buffer {st.buf.name}", st.loc)
        shape = tuple(int(np.max(e)) if np.ndim(e) else int(e) for e in extents)
        storage = dtype_of(st.buf.dtype).storage
        full = allocatable(tuple(self.batch) + shape, storage.itemsize, f"buffer {st.buf.name}", st.loc)
        self.bufs[st.buf.name] = (np.zeros(full, storage), self.depth)
        self.dtypes[st.buf.name] = st.buf.dtype
        self.decl_scope[st.buf.name] = len(self.recorder.scopes) if self.recorder is not None else 0

    def cells(self, buf: str, index: tuple[IExpr, ...], active: np.ndarray, loc: Loc, what: str):
        """Full index arrays (buffer batch axes + element index), broadcast to the batch shape."""
        arr, depth = self.bufs[buf]
        shape = tuple(self.batch)
        if arr.ndim == 0:  # a scalar buffer: index its one-element view
            return arr.reshape(1), (np.zeros(shape, np.intp),)
        parts = []
        for a in range(depth):
            parts.append(np.arange(shape[a]).reshape((1,) * a + (-1,) + (1,) * (len(shape) - a - 1)))
        for e in index:
            parts.append(np.asarray(self.idx(e)))
        parts = [np.broadcast_to(x, shape) for x in parts]
        elem = arr.shape[depth:]
        for a, (ix, n) in enumerate(zip(parts[depth:], elem)):
            bad = active & ((ix < 0) | (ix >= n))
            if bad.any():
                where = tuple(int(p[tuple(np.argwhere(bad)[0])]) for p in parts[depth:])
                raise ExecutionError(f"{what} of {buf} at {where} is out of bounds {elem}", loc,
                                     "guard the access or pad the buffer")
            parts[depth + a] = np.where(active, ix, 0) if not active.all() else ix
        return arr, tuple(parts)

    def written(self, st, what: str):
        """For a store or update: the active lanes, the value and the cells (None when no lane is active)."""
        active = self.full_mask()
        if not active.any():
            return None
        val = np.broadcast_to(self.expr(st.value, active, st.loc), tuple(self.batch))
        arr, parts = self.cells(st.buf, st.index, active, st.loc, what)
        self.note(st.buf, arr, parts, active, True, st.loc)
        return active, val, arr, parts

    def st_Assign(self, st: L.Assign) -> None:
        target = self.written(st, "store")
        if target is not None:
            active, val, arr, parts = target
            arr[tuple(p[active] for p in parts)] = store_as(dtype_of(self.dtypes[st.buf]), val[active])

    def st_Accum(self, st: L.Accum) -> None:
        target = self.written(st, "update")
        if target is None:
            return
        active, val, arr, parts = target
        dt = dtype_of(self.dtypes[st.buf])
        sel = tuple(p[active] for p in parts)
        if dt.name == "bf16":  # round after every update, in order: the r-th updates of all cells at once
            vals = val[active]
            cells = np.ravel_multi_index(sel, arr.shape) if sel else np.zeros(len(vals), np.intp)
            order = np.argsort(cells, kind="stable")
            first = np.searchsorted(cells[order], cells[order], side="left")
            rank = np.empty_like(order)
            rank[order] = np.arange(len(order)) - first
            flat = arr.reshape(-1)
            for r in range(int(rank.max()) + 1 if len(rank) else 0):
                at = rank == r
                flat[cells[at]] = store_as(dt, MERGE[st.op](flat[cells[at]], vals[at]))
            return
        MERGE[st.op].at(arr, sel, val[active].astype(arr.dtype, copy=False))

    def note(self, buf: str, arr, parts, active, is_write: bool, loc: Loc) -> None:
        if self.recorder is not None and self.decl_scope.get(buf, 0) < len(self.recorder.scopes) and active.any():
            sel = tuple(p[active] for p in parts)
            cells = np.ravel_multi_index(sel, arr.shape) if sel else np.zeros(int(active.sum()), np.int64)
            info, insts = self.scope_info[-1], None
            if info is not None:  # a batched scope: each cell's instance is its point on the scope's axes
                ids = np.zeros((1,) * self.depth, np.int64)
                for a in info.axes:
                    ids = ids * self.batch[a] + np.arange(self.batch[a]).reshape(
                        (1,) * a + (-1,) + (1,) * (self.depth - a - 1))
                insts = np.broadcast_to(ids, active.shape)[active]
            self.recorder.record(buf, cells, is_write, f"{'write' if is_write else 'read'} at {loc}", insts)

    # ------------------------------------------------------------------ expressions
    def expr(self, e: L.SExpr, active: np.ndarray, loc: Loc) -> np.ndarray:
        if isinstance(e, L.Ld):
            arr, parts = self.cells(e.buf, e.index, active, loc, "load")
            self.note(e.buf, arr, parts, active, False, loc)
            if arr.size == 0:  # no lane is active (an active one is out of bounds): nothing is read
                return np.zeros(active.shape, arr.dtype)
            return arr[parts]
        if isinstance(e, L.Lit):
            return np.asarray(e.value, dtype_of(e.dtype).storage)
        if isinstance(e, L.Ix):
            return store_as(dtype_of(e.dtype), np.asarray(self.idx(e.expr)))
        if isinstance(e, L.Cvt):
            return store_as(dtype_of(e.dtype), self.expr(e.x, active, loc))
        if isinstance(e, L.Un):
            return store_as(dtype_of(e.dtype), UNARY[e.fn](self.expr(e.x, active, loc)))
        if isinstance(e, L.Bin):
            a, b = self.expr(e.a, active, loc), self.expr(e.b, active, loc)
            if e.fn in ("floordiv", "mod") and np.any(np.broadcast_to(b, active.shape)[active] == 0):
                raise ExecutionError(f"integer {e.fn} by zero", loc, "guard the divisor")
            return store_as(dtype_of(e.dtype), BINARY[e.fn](a, b))
        if isinstance(e, L.Sel):
            c = np.broadcast_to(self.expr(e.cond, active, loc), active.shape)
            a = self.expr(e.a, active & c, loc)
            b = self.expr(e.b, active & ~c, loc)
            return store_as(dtype_of(e.dtype), np.where(c, a, b))
        raise TypeError(type(e).__name__)

    # ------------------------------------------------------------------ control
    def st_If(self, st: L.If) -> None:
        cond = np.asarray(self.idx(st.cond), bool)
        saved = self.mask
        self.mask = np.logical_and(saved, cond)
        if np.any(self.mask):
            self.block(st.body)
        self.mask = saved

    st_StageBlock = st_If  # a stage subregion is a block (its guard is true)

    def st_AsyncCopy(self, st: L.AsyncCopy) -> None:
        """The copy, landed at once: what it means where its wait precedes every access of its cell."""
        self.st_Assign(st)

    def st_AsyncWait(self, st: L.AsyncWait) -> None:
        """The block barrier it ends with (its copies have landed at their issue here)."""
        self.st_Barrier(st)

    def st_Barrier(self, st: L.Barrier) -> None:
        """Every scope instance is reached by all its participants or by none.

        The participants of a block barrier are the block's threads (the block, warp and lane
        axes); those of a warp barrier are one warp's lanes (a warp axis indexes instances).
        """
        members = PARTICIPANTS.get(st.scope, PARTICIPANTS["block"])
        axes = tuple(a for a, lp in enumerate(self.batch_loops) if L.binding_kind(lp.binding) in members)
        if axes:
            self.uniform(st, axes)
        if self.recorder is not None:
            self.phase(members)

    def uniform(self, st: L.Barrier, axes: tuple[int, ...]) -> None:
        """Raise unless every instance of the barrier's scope is reached by all participants or none."""
        active = self.full_mask()
        every, some = active.all(axis=axes), active.any(axis=axes)
        split = some & ~every
        if not split.any():
            return
        instance = tuple(np.argwhere(split)[0]) if split.ndim else ()
        others = [a for a in range(self.depth) if a not in axes]
        at = active[tuple(np.s_[:] if a in axes else instance[others.index(a)] for a in range(self.depth))]
        names = [self.batch_loops[a].name for a in axes]
        who = [tuple(int(c) for c in x) for x in np.argwhere(at)][:8]
        missing = [tuple(int(c) for c in x) for x in np.argwhere(~at)][:8]
        raise ExecutionError(
            f"{st.scope} barrier reached by participants ({', '.join(names)}) = {who} but not by {missing}", st.loc,
            "a barrier must be reached by all participants of its scope or by none; move it out of the guard")

    def batchable(self, st: L.Loop) -> bool:
        """A reduce loop runs batched when its iterations interact only through ``Accum``: it
        assigns only buffers it declares and holds no serial or pipeline loop."""
        if st.var not in self._batchable:
            declared = {d.buf.name for d in ir.walk(st.body) if isinstance(d, L.Decl)}
            written = {s.buf for s in ir.walk(st.body) if isinstance(s, L.Assign)}
            self._batchable[st.var] = not (written - declared) and not any(
                isinstance(s, L.Loop) and s.kind in ("serial", "pipeline") for s in ir.walk(st.body))
        return self._batchable[st.var]

    def instance_order(self, n: int) -> np.ndarray:
        if self.order == "reverse":
            return np.arange(n - 1, -1, -1)
        if self.order == "shuffle":
            return self.rng.permutation(n)
        return np.arange(n)

    def st_Loop(self, st: L.Loop) -> None:
        ext, start = self.idx(st.extent), self.idx(st.start)
        active = self.full_mask()
        live = np.broadcast_to(ext, active.shape)[active] if np.ndim(ext) else np.asarray([ext])
        if live.size and int(live.min()) < 0:
            raise ExecutionError(f"loop {st.name} has extent {st.extent} = {int(live.min())} < 0", st.loc,
                                 "check the sizes: a loop extent must not be negative")
        n = int(live.max()) if live.size else 0
        if n <= 0:
            return
        conc = concurrent(st)
        lockstep = L.binding_kind(st.binding) in LOCKSTEP or any(self.batch_conc)
        if conc and (lockstep or st.kind == "parallel") or \
                (not conc and st.kind == "reduce" and self.batchable(st)):
            self.loop_batched(st, n, ext, start, conc)
        else:
            self.loop_each(st, n, ext, start, conc)

    def loop_batched(self, st: L.Loop, n: int, ext: Any, start: Any, conc: bool) -> None:
        """All iterations at once on a new batch axis (in the chosen order when concurrent); a
        thread-dependent extent masks off the iterations past it. Checked mode records the
        accesses of a concurrent loop per instance (see ``open_batch_scope``)."""
        d = self.depth
        order = self.instance_order(n) if conc else np.arange(n)
        pos = order.reshape((1,) * d + (n,))
        self.coords[(st.var, 0)] = _pad(start, d)[..., None] + pos if np.ndim(start) else pos + start
        saved = self.mask
        mask = np.expand_dims(np.asarray(saved, bool), -1) if np.ndim(saved) else saved
        if np.ndim(ext):
            mask = np.logical_and(mask, pos < _pad(ext, d)[..., None])
        self.batch.append(n)
        self.batch_loops.append(st)
        self.batch_conc.append(conc)
        self.mask = mask
        scoped = self.recorder is not None and conc
        try:
            if scoped:
                self.open_batch_scope(st, order + start if not np.ndim(start) else order)
            self.block(st.body)
            if scoped:
                self.close_scope()
        finally:
            self.batch.pop()
            self.batch_loops.pop()
            self.batch_conc.pop()
            self.mask = saved

    def loop_each(self, st: L.Loop, n: int, ext: Any, start: Any, conc: bool) -> None:
        """One iteration after another (in the chosen order when concurrent); checked mode records
        the accesses of a concurrent loop per iteration."""
        order = self.instance_order(n).tolist() if conc else range(n)
        scoped = self.recorder is not None and conc
        if scoped:
            self.recorder.begin(st.name, st.loc)
            self.scope_info.append(None)
        saved = self.mask
        try:
            for i in order:
                self.coords[(st.var, 0)] = start + i
                if np.ndim(ext):
                    self.mask = np.logical_and(saved, i < ext)
                    if not np.any(self.mask):
                        continue
                if scoped:
                    self.recorder.instance((int(i + start) if not np.ndim(start) else int(i),))
                self.block(st.body)
        finally:
            self.mask = saved
        if scoped:
            self.close_scope()

    # ------------------------------------------------------------------ noninterference (checked mode)
    def open_batch_scope(self, st: L.Loop, coords: np.ndarray) -> None:
        """A scope for the batch axis just opened: its instances are the points of the concurrent
        batch axes of this lockstep group (the enclosing batched scopes' and this one), numbered
        row-major, so the enclosing scope's instance of number ``x`` is ``x // n``."""
        axis, n = self.depth - 1, len(coords)
        outer = self.scope_info[-1] if self.scope_info else None
        axes = (outer.axes if outer is not None else []) + [axis]
        names = (outer.names if outer is not None else []) + [st.name]
        lanes = (outer.lanes.coords if outer is not None else []) + [np.asarray(coords)]
        info = _BatchScope(axes, names, Grid(lanes), L.binding_kind(st.binding),
                           (lambda x: x // n) if outer is not None else None)
        self.recorder.begin(", ".join(names), st.loc, info.lanes)
        self.scope_info.append(info)

    def close_scope(self) -> None:
        info = self.scope_info.pop()
        self.recorder.end(self.describe_cell, self.shared, info.lift if info is not None else None)

    def describe_cell(self, buf: str, cell: int) -> tuple[int, ...]:
        return tuple(int(c) for c in np.unravel_index(cell, self.bufs[buf][0].shape))

    def shared(self, buf: str, depth: int) -> bool:
        return self.decl_scope.get(buf, 0) < depth

    def phase(self, members: tuple[str, ...]) -> None:
        """A barrier ends the current phase of the innermost batched scopes down to the outermost one
        bound to a participant kind of its scope: their accesses before and after are not compared."""
        count = 0
        for k in range(len(self.scope_info) - 1, -1, -1):
            info = self.scope_info[k]
            if info is None:
                break
            if info.kind in members:
                count = len(self.scope_info) - k
        if count:
            lifts = [self.scope_info[-1 - k].lift for k in range(count)]
            self.recorder.restart(count, self.describe_cell, self.shared, lifts)


@dataclass
class _BatchScope:
    """A checked-mode scope over batch axes: its axes, loop names, instances, binding kind and lift."""

    axes: list[int]
    names: list[str]
    lanes: Grid
    kind: Optional[str]
    lift: Optional[Callable[[np.ndarray], np.ndarray]]


def concurrent(lp: L.Loop) -> bool:
    """Whether a loop's iterations run concurrently: a parallel loop, or any hardware binding."""
    return lp.kind == "parallel" or L.binding_kind(lp.binding) in SCOPES


def interpret_loops(p: ir.Program, sizes: Mapping[str, int], arrays: dict[str, np.ndarray], *,
                    order: str = "canonical", seed: int = 0, checked: bool = True) -> None:
    LoopInterpreter(p, sizes, arrays, order=order, seed=seed, checked=checked).run()
