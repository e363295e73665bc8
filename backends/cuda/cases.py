"""Loop-form programs that exercise the CUDA execution model, and GPU schedules for kernels.

Three hand-built programs use shared memory and block barriers, each in three variants:
``ok`` (barriers where the phases need them), ``racy`` (one barrier left out: a thread reads
a cell of shared memory that another thread writes in the same phase; the interpreter's
lockstep execution still computes the intended values, the host emulation's
ThreadSanitizer build reports the race) and ``divergent`` (one barrier moved under a guard
that only some threads of the block pass: the interpreter and the host emulation both
report the barrier divergence, naming the threads).

- ``tree_reduction(variant)``: ``Y[g] = sum(X[8g .. 8g+8))`` (elements at or past ``N`` are 0),
  one block of 8 threads per ``g``: the threads load a shared array, then halve it in three
  steps ``s[t] += s[t + stride]`` for ``t < stride``, a barrier after each.
- ``shared_transpose(variant)``: ``B = A^T`` through a 4 x 5 shared tile (4 x 4 used, the extra
  column spreads a column's cells over banks), one 4 x 4 block per tile.
- ``halo_stencil(variant)``: ``Y[i] = X[i-1] + 2 X[i] + X[i+1]`` (0 outside), one block of 8
  threads per 8 outputs: each thread loads its element into a 10-element shared array, the
  first and the last thread also load the halo cells at both ends.
- ``warp_reduction(variant)``: ``Y[w] = sum(X[32w .. 32w+32))`` (blocks of 2 warps), each warp
  halving its own shared copy in five steps with warp barriers.

``gpu_schedule(kernel, **sizes)`` binds a kernel for a GPU with ``split`` and ``bind``.
"""
from __future__ import annotations

from typing import Any, Optional

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import InputError
from tilecert.semantics.index import IBin, IConst, IExpr, ISize, IVar, cdiv, ibin
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.sched import Schedule

VARIANTS = ("ok", "racy", "divergent")
THREADS = 8  # threads per block of the 1-D programs
TILE = 4  # the transpose's tile
WARPS, LANES = 2, 32  # the warp reduction's block


def _v(var: int) -> IVar:
    return IVar(var, 0)


def _add(a: IExpr, b: IExpr) -> IExpr:
    return ibin("add", a, b)


def _mul(a: IExpr, k: int) -> IExpr:
    return ibin("mul", a, IConst(k))


def _lt(a: IExpr, b: IExpr) -> IExpr:
    return IBin("lt", a, b)


def _and(a: IExpr, b: IExpr) -> IExpr:
    return IBin("and", a, b)


def _block(*ops: Any) -> ir.Block:
    return ir.Block((), tuple(ops))


def _loop(var: int, name: str, extent: IExpr, binding: str, *body: Any) -> L.Loop:
    return L.Loop(var, name, extent, "parallel", _block(*body), binding)


def _guarded_load(buf: str, index: tuple[IExpr, ...], ok: IExpr, dtype: str) -> L.SExpr:
    """``buf[index]`` where ``ok`` holds, else 0."""
    return L.Sel(L.Ix(ok, "bool"), L.Ld(buf, index, dtype), L.Lit(0, dtype), dtype)


def _tensor(name: str, dtype: str, dims: tuple[tuple[int, str], ...], written: bool) -> ir.TensorDecl:
    return ir.TensorDecl(name, dtype, tuple(ir.Dim(i, label) for i, label in dims),
                         tuple(ISize(label) for _, label in dims), written)


def _check(variant: str) -> None:
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}", hint=f"variants: {', '.join(VARIANTS)}")


def tree_reduction(variant: str = "ok") -> ir.Program:
    """Per block of 8 threads, the sum of 8 elements of ``X`` by halving in shared memory."""
    _check(variant)
    g, t = _v(0), _v(1)
    base = _mul(g, THREADS)
    load = L.Assign("s", (t,), _guarded_load("X", (_add(base, t),), _lt(_add(base, t), ISize("N")), "i32"))
    ops: list[Any] = [load, L.Barrier("block")]
    for stride in (4, 2, 1):
        step = L.Assign("s", (t,), L.Bin("add", L.Ld("s", (t,), "i32"), L.Ld("s", (_add(t, IConst(stride)),), "i32"),
                                         "i32"))
        if variant == "divergent" and stride == 4:
            ops.append(L.If(_lt(t, IConst(stride)), _block(step, L.Barrier("block"))))
            continue
        ops.append(L.If(_lt(t, IConst(stride)), _block(step)))
        if not (variant == "racy" and stride == 4):
            ops.append(L.Barrier("block"))
    ops.append(L.If(IBin("eq", t, IConst(0)), _block(L.Assign("Y", (g,), L.Ld("s", (IConst(0),), "i32")))))
    body = _block(_loop(0, "g", ISize("G"), "grid0", L.Decl(L.Buffer("s", "i32", (IConst(THREADS),), "shared")),
                        _loop(1, "t", IConst(THREADS), "block0", *ops)))
    return ir.Program(f"tree_reduction_{variant}", ("N", "G"),
                      (_tensor("X", "i32", ((0, "N"),), False), _tensor("Y", "i32", ((1, "G"),), True)), body)


def shared_transpose(variant: str = "ok") -> ir.Program:
    """``B = A^T`` through a shared tile, one block of 4 x 4 threads per tile."""
    _check(variant)
    by, bx, ty, tx = _v(0), _v(1), _v(2), _v(3)
    m, n = ISize("M"), ISize("N")
    row, col = _add(_mul(by, TILE), ty), _add(_mul(bx, TILE), tx)
    load = L.If(_and(_lt(row, m), _lt(col, n)), _block(L.Assign("tile", (ty, tx), L.Ld("A", (row, col), "f32"))))
    out_row, out_col = _add(_mul(bx, TILE), ty), _add(_mul(by, TILE), tx)
    store = L.If(_and(_lt(out_row, n), _lt(out_col, m)),
                 _block(L.Assign("B", (out_row, out_col), L.Ld("tile", (tx, ty), "f32"))))
    barrier = {"ok": [L.Barrier("block")], "racy": [],
               "divergent": [L.If(_lt(tx, IConst(TILE // 2)), _block(L.Barrier("block")))]}[variant]
    inner = [load] + barrier + [store]
    threads = _loop(2, "ty", IConst(TILE), "block1", _loop(3, "tx", IConst(TILE), "block0", *inner))
    body = _block(_loop(0, "by", cdiv(m, IConst(TILE)), "grid1",
                        _loop(1, "bx", cdiv(n, IConst(TILE)), "grid0",
                              L.Decl(L.Buffer("tile", "f32", (IConst(TILE), IConst(TILE + 1)), "shared")), threads)))
    return ir.Program(f"shared_transpose_{variant}", ("M", "N"),
                      (_tensor("A", "f32", ((0, "M"), (1, "N")), False),
                       _tensor("B", "f32", ((1, "N"), (0, "M")), True)), body)


def halo_stencil(variant: str = "ok") -> ir.Program:
    """``Y[i] = X[i-1] + 2 X[i] + X[i+1]`` with a halo loaded cooperatively into shared memory."""
    _check(variant)
    b, t = _v(0), _v(1)
    n = ISize("N")
    base = _mul(b, THREADS)
    mine = _add(base, t)
    left, right = ibin("sub", base, IConst(1)), _add(base, IConst(THREADS))
    ops: list[Any] = [
        L.Assign("s", (_add(t, IConst(1)),), _guarded_load("X", (mine,), _lt(mine, n), "i32")),
        L.If(IBin("eq", t, IConst(0)), _block(L.Assign("s", (IConst(0),), _guarded_load(
            "X", (left,), _and(IBin("ge", left, IConst(0)), _lt(left, n)), "i32")))),
        L.If(IBin("eq", t, IConst(THREADS - 1)), _block(
            L.Assign("s", (IConst(THREADS + 1),), _guarded_load("X", (right,), _lt(right, n), "i32")))),
    ]
    if variant == "ok":
        ops.append(L.Barrier("block"))
    elif variant == "divergent":
        ops.append(L.If(IBin("eq", t, IConst(0)), _block(L.Barrier("block"))))
    s = lambda k: L.Ld("s", (_add(t, IConst(k)),), "i32")  # noqa: E731
    value = L.Bin("add", L.Bin("add", s(0), L.Bin("mul", L.Lit(2, "i32"), s(1), "i32"), "i32"), s(2), "i32")
    ops.append(L.If(_lt(mine, n), _block(L.Assign("Y", (mine,), value))))
    body = _block(_loop(0, "b", cdiv(n, IConst(THREADS)), "grid0",
                        L.Decl(L.Buffer("s", "i32", (IConst(THREADS + 2),), "shared")),
                        _loop(1, "t", IConst(THREADS), "block0", *ops)))
    return ir.Program(f"halo_stencil_{variant}", ("N",),
                      (_tensor("X", "i32", ((0, "N"),), False), _tensor("Y", "i32", ((1, "N"),), True)), body)


def warp_reduction(variant: str = "ok") -> ir.Program:
    """Per warp of 32 lanes (2 warps a block), the sum of 32 elements of ``X`` by halving in the
    warp's own copy of a shared array, with warp barriers."""
    _check(variant)
    g, w, lane = _v(0), _v(1), _v(2)
    base = _mul(_add(_mul(g, WARPS), w), LANES)
    mine = _add(base, lane)
    ops: list[Any] = [L.Assign("s", (lane,), _guarded_load("X", (mine,), _lt(mine, ISize("N")), "i32")),
                      L.Barrier("warp")]
    for stride in (16, 8, 4, 2, 1):
        step = L.Assign("s", (lane,), L.Bin("add", L.Ld("s", (lane,), "i32"),
                                            L.Ld("s", (_add(lane, IConst(stride)),), "i32"), "i32"))
        if variant == "divergent" and stride == 16:
            ops.append(L.If(_lt(lane, IConst(stride)), _block(step, L.Barrier("warp"))))
            continue
        ops.append(L.If(_lt(lane, IConst(stride)), _block(step)))
        if not (variant == "racy" and stride == 8):
            ops.append(L.Barrier("warp"))
    out = _add(_mul(g, WARPS), w)
    ops.append(L.If(_and(IBin("eq", lane, IConst(0)), _lt(out, ISize("W"))),
                    _block(L.Assign("Y", (out,), L.Ld("s", (IConst(0),), "i32")))))
    warps = _loop(1, "w", IConst(WARPS), "warp", L.Decl(L.Buffer("s", "i32", (IConst(LANES),), "shared")),
                  _loop(2, "l", IConst(LANES), "lane", *ops))
    body = _block(_loop(0, "g", cdiv(ISize("W"), IConst(WARPS)), "grid0", warps))
    return ir.Program(f"warp_reduction_{variant}", ("N", "W"),
                      (_tensor("X", "i32", ((0, "N"),), False), _tensor("Y", "i32", ((1, "W"),), True)), body)


PROGRAMS = {"tree_reduction": tree_reduction, "shared_transpose": shared_transpose, "halo_stencil": halo_stencil,
            "warp_reduction": warp_reduction}


# ----------------------------------------------------------------------------- schedules
def _chain(lp: L.Loop, limit: int = 3) -> list[L.Loop]:
    """``lp`` and the parallel loops perfectly nested in it, outermost first (at most ``limit``)."""
    chain = [lp]
    while len(chain) < limit and len(chain[-1].body.ops) == 1 and isinstance(chain[-1].body.ops[0], L.Loop) \
            and chain[-1].body.ops[0].kind == "parallel":
        chain.append(chain[-1].body.ops[0])
    return chain


def _nests(block: ir.Block) -> list[list[L.Loop]]:
    """The maximal parallel nests in ``block`` that no other parallel loop of it encloses."""
    out: list[list[L.Loop]] = []
    for op in block.ops:
        if isinstance(op, L.Loop) and op.kind == "parallel":
            out.append(_chain(op))
        elif isinstance(op, (L.Loop, L.If)):
            out.extend(_nests(op.body))
    return out


def _find(s: Schedule, name: str) -> L.Loop:
    return next(lp for lp in L.loops(s.program.body) if lp.name == name)


def gpu_schedule(kernel: Kernel, split: Optional[int] = 2, **sizes_and_config: Any) -> Schedule:
    """A GPU schedule of ``kernel`` made with ``split`` and ``bind``: each top-level parallel nest
    to grid slots (innermost ``grid0``; in a nest of fewer than three loops the innermost is split
    by ``split`` first, its outer part taking the next slot), and inside it every maximal parallel
    nest to block slots (innermost ``block0``). Loops of other kinds stay serial; top-level
    statements without a parallel nest run as single-block launches."""
    s = Schedule.create(kernel, **sizes_and_config)
    for top in [op for op in s.program.body.ops if isinstance(op, L.Loop) and op.kind == "parallel"]:
        names = [lp.name for lp in _chain(top)]
        if split and len(names) < 3:
            names = names[:-1] + list(s.split(names[-1], split))
        for slot, name in enumerate(reversed(names)):
            s.bind(name, f"grid{slot}")
        for nest in _nests(_find(s, names[-1]).body):
            for slot, lp in enumerate(reversed(nest)):
                s.bind(lp.name, f"block{slot}")
    return s
