"""The reference interpreter for loop form.

Loops run SIMT-style over *batch axes*: a parallel loop whose body's extents do not read
its variable runs all its iterations at once (one batch axis, in the chosen instance
order); a reduce loop does too when its iterations interact only through ``Accum``
(updates are applied with ``ufunc.at`` in lexicographic iteration order, which every
policy admits); serial and pipeline loops iterate. ``If`` narrows an activity mask, so
a perfectly nested parallel / reduce nest with one statement is a handful of numpy
operations. A ``Sel`` evaluates each branch only where it is chosen (an out-of-bounds
load in a lane that does not take its branch is not an access).

Barriers are the lockstep points of batched execution: every active participant of a
bound loop reaches each statement together. A barrier reached by some participants of a
bound scope (block, warp, lane loops) and not others is an ``ExecutionError`` naming them.
In checked mode, parallel loops run their iterations one by one (bound loops stay in
lockstep) and every buffer cell an iteration touches is recorded; a cell written by one
iteration and accessed by another raises ``NoninterferenceError``.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from . import ir
from . import loopir as L
from .conflicts import Recorder
from .dtypes import dtype_of, store_as
from .errors import ExecutionError, Loc
from .index import IExpr, evaluate, free_vars
from .ufuncs import BINARY, MERGE, UNARY

THREAD_SCOPES = ("block", "warp", "lane")
PARTICIPANTS = {"block": ("block", "warp", "lane"), "warp": ("lane",)}


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
        self.mask: Any = True
        self.recorder = Recorder() if checked else None
        self._batchable: dict[int, bool] = {}
        self.decl_scope: dict[str, int] = {}  # checked mode: the parallel scope depth that owns a buffer

    @property
    def depth(self) -> int:
        return len(self.batch)

    def run(self) -> None:
        with np.errstate(all="ignore"):
            self.block(self.p.body)

    def block(self, block: ir.Block) -> None:
        for st in block.ops:
            getattr(self, "st_" + type(st).__name__)(st)

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
        shape = tuple(int(np.max(self.idx(s))) if np.ndim(self.idx(s)) else int(self.idx(s)) for s in st.buf.shape)
        self.bufs[st.buf.name] = (np.zeros(tuple(self.batch) + shape, dtype_of(st.buf.dtype).storage), self.depth)
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
        if self.recorder is not None and self.decl_scope.get(buf, 0) < len(self.recorder.scopes):
            sel = tuple(p[active] for p in parts)
            cells = np.ravel_multi_index(sel, arr.shape) if sel else np.zeros(int(active.sum()), np.int64)
            self.recorder.record(buf, cells, is_write, f"{'write' if is_write else 'read'} at {loc}")

    # ------------------------------------------------------------------ expressions
    def expr(self, e: L.SExpr, active: np.ndarray, loc: Loc) -> np.ndarray:
        if isinstance(e, L.Ld):
            arr, parts = self.cells(e.buf, e.index, active, loc, "load")
            self.note(e.buf, arr, parts, active, False, loc)
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

    def st_Barrier(self, st: L.Barrier) -> None:
        """Every scope instance is reached by all its participants or by none.

        The participants of a block barrier are the block's threads (the block, warp and lane
        axes); those of a warp barrier are one warp's lanes (a warp axis indexes instances).
        """
        members = PARTICIPANTS.get(st.scope, PARTICIPANTS["block"])
        axes = tuple(a for a, lp in enumerate(self.batch_loops) if L.binding_kind(lp.binding) in members)
        if not axes:
            return
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
        if st.var in self._batchable:
            return self._batchable[st.var]
        ok = st.kind in ("parallel", "reduce") or L.binding_kind(st.binding) in THREAD_SCOPES + ("vector",)
        var = (st.var, 0)
        for inner in ir.walk(st.body):
            exts = [getattr(inner, "extent", None), getattr(inner, "start", None)] \
                + list(getattr(getattr(inner, "buf", None), "shape", ()) or ())
            if any(e is not None and var in free_vars(e) for e in exts):
                ok = False
        if st.kind == "reduce" and ok:
            declared = {d.buf.name for d in ir.walk(st.body) if isinstance(d, L.Decl)}
            written = {s.buf for s in ir.walk(st.body) if isinstance(s, L.Assign)}
            if written - declared or any(isinstance(s, L.Loop) and s.kind in ("serial", "pipeline")
                                         for s in ir.walk(st.body)):
                ok = False
        self._batchable[st.var] = ok
        return ok

    def st_Loop(self, st: L.Loop) -> None:
        n = int(self.idx(st.extent)) if not np.ndim(self.idx(st.extent)) else int(np.max(self.idx(st.extent)))
        start = self.idx(st.start)
        if n <= 0:
            return
        bound = L.binding_kind(st.binding) in THREAD_SCOPES
        per_instance = self.checked and st.kind == "parallel" and not bound
        if self.batchable(st) and not per_instance:
            order = np.arange(n)
            if st.kind == "parallel" and self.order == "reverse":
                order = order[::-1]
            elif st.kind == "parallel" and self.order == "shuffle":
                order = self.rng.permutation(n)
            self.coords[(st.var, 0)] = (order + start).reshape((1,) * self.depth + (n,))
            self.batch.append(n)
            self.batch_loops.append(st)
            saved = self.mask
            self.mask = np.expand_dims(np.asarray(saved, bool), -1) if np.ndim(saved) else saved
            try:
                self.block(st.body)
            finally:
                self.batch.pop()
                self.batch_loops.pop()
                self.mask = saved
            return
        if bound:
            raise ExecutionError(f"bound loop {st.name} cannot run in lockstep (its body's extents read its variable)",
                                 st.loc, "make the inner extents independent of the bound loop variable")
        order = range(n)
        if st.kind == "parallel" and self.order == "reverse":
            order = range(n - 1, -1, -1)
        elif st.kind == "parallel" and self.order == "shuffle":
            order = self.rng.permutation(n).tolist()
        if per_instance and self.recorder is not None:
            self.recorder.begin(st.name, st.loc)
        for i in order:
            self.coords[(st.var, 0)] = i + start
            if per_instance and self.recorder is not None:
                self.recorder.instance((int(i),))
            self.block(st.body)
        if per_instance and self.recorder is not None:
            self.recorder.end(lambda buf, cell: tuple(int(c) for c in np.unravel_index(cell, self.bufs[buf][0].shape)),
                              lambda buf, depth: self.decl_scope.get(buf, 0) < depth)


def interpret_loops(p: ir.Program, sizes: Mapping[str, int], arrays: dict[str, np.ndarray], *,
                    order: str = "canonical", seed: int = 0, checked: bool = True) -> None:
    LoopInterpreter(p, sizes, arrays, order=order, seed=seed, checked=checked).run()
