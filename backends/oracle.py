"""The comparison oracle of the differential harness: what a backend may return for each element.

A trial's oracle is built from a loop-form program with the kernel's meaning (the scheduled
program, or the expanded kernel) and the trial's inputs. It runs the program once in the
loop interpreter with a *shadow* per buffer cell, propagated by the rules below, and from
the shadows of the written tensors decides each element's rule:

**Bitwise** where no admitted evaluation can differ: the shadow flag ``F`` ("may differ") is
false. ``F`` is raised by a float ``Accum`` under a tree policy (``unordered_tree`` /
``ordered_tree``: the specification's balanced or adversarial trees and a backend's loop
order are different association orders; a float ``max`` / ``min`` tree may differ in the
sign of a zero) or whose contribution is a product formed in the update (the expansion of
``mma``, which the specification contracts as one product even inside a fold), by ``exp`` / ``log`` / ``tanh`` (library functions differ in the last
bits), and it propagates from operands to results, through stores, loads and folds. It is
not raised by folds (``fold_left`` / ``fold_right`` fix the order, which a proved schedule
keeps), by elementwise IEEE operations (``+ - * /``, ``sqrt``, conversions: correctly
rounded in every backend, the narrow floats computed in f32 and rounded once) nor by
integer and bool arithmetic (wrapping, exact in any order). So integer kernels, folds and
elementwise float kernels compare bit for bit, signed zeros included; any NaN matches any
NaN.

**Bounded** elsewhere, per element: ``|backend - expected| <= T`` with, for a float of
unit roundoff ``u`` (f16 2**-11, bf16 2**-8, f32 2**-24, f64 2**-53) and underflow unit
``eta`` (the smallest subnormal, at least the underflow error of one rounding),

    T = c * u * L * S + L * eta + A,   c = 1

- ``S``: the sum of the absolute values of the contributions actually combined (the
  program run on ``|inputs|`` with ``|.|`` ops: ``S(a +- b) = S(a) + S(b)``,
  ``S(a * b) = S(a) S(b)``, ``S(max(a, b)) = max``); infinite and NaN inputs contribute 0
  (they propagate alike in every order);
- ``L``: the longest chain of roundings that may differ: a sum counts every addition of
  its flattened terms (``L(a + b) = L(a) + L(b) + 1`` over sums, so an accumulation split
  into private partials and a store-back counts as many additions as any tree over all
  its terms: a tree over ``n`` terms has depth at most ``n - 1``), plus the longest chain
  inside a term (``L(a * b) = L(a) + L(b) + 1``), plus one for the term's own rounding (an
  evaluation may keep it wide: the specification's bf16 ``mma`` accumulates in f32); a
  rounding that every evaluation performs on equal operands does not count;
- ``A``: error carried from non-linear operations, with ``T(x)`` the operand's bound:
  monotone functions (``exp``, ``log``, ``sqrt``, ``tanh``) take the width of the image of
  ``[x - T(x), x + T(x)]`` (unbounded when ``T(x)`` is: the operand may be NaN), plus 4 ulp (f32, f64) or 1 ulp (f16, bf16: f32 results a few
  f32 ulp apart round to neighbours) for ``exp`` / ``log`` / ``tanh``; a ``log`` or
  ``sqrt`` whose interval reaches 0 is unbounded; ``a / b`` is
  ``(T(a)|b| + |a|T(b)) / (|b|(|b| - T(b)))``, unbounded when ``|b| <= T(b)``;
  ``a * b`` adds ``S(a)A(b) + S(b)A(a) + T(a)T(b)``; a float-to-int conversion
  ``T(x) + 1``; a comparison may flip when ``|a - b| <= T(a) + T(b)`` (its bool may differ),
  and a select on a condition that may flip takes ``max(T(a), T(b)) + |a - b|``; an
  integer ``//`` or ``%`` of operands that may differ is unbounded; a product
  accumulation carrying error is unbounded.

An element whose magnitude bound may overflow (``S (1 + u L) + A`` above the dtype's
largest finite value, or above the integer range for integers) is unbounded: any value
agrees, since another order may overflow where this one did not. Otherwise special values
must agree: NaN with NaN, infinities with the same infinity.

Soundness: the first-order bound ``u L S`` is Higham's bound on one evaluation's
distance from the exact value; using it for the distance between two evaluations (the
specification's and the backend's) relies on their rounding errors not both being worst
case in opposite directions, the one step of the rule that is not a proof (``c = 2`` would
make it one, and would let a bf16 GEMM returning half its result pass). Everything else is
a rigorous bound, computed in float64.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.dtypes import dtype_of, round_bf16
from tilecert.semantics.inputs import prepare_inputs
from tilecert.semantics.limits import check_allocation
from tilecert.semantics.loopinterp import LoopInterpreter

UNIT_ROUNDOFF = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 2.0**-53}
UNDERFLOW = {"f16": 2.0**-24, "bf16": 2.0**-133, "f32": 2.0**-149, "f64": 2.0**-1074}  # smallest subnormals
LARGEST = {"f16": 65504.0, "bf16": float(np.uint32(0x7F7F0000).view(np.float32)),
           "f32": float(np.finfo(np.float32).max), "f64": float(np.finfo(np.float64).max)}
LIBRARY_ULPS = {"f16": 1.0, "bf16": 1.0, "f32": 4.0, "f64": 4.0}
LIBRARY_FNS = ("exp", "log", "tanh")
MONOTONE = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}
TREES = ("unordered_tree", "ordered_tree")
BOUNDED = 5e-324  # the smallest bound of an element that is not compared bitwise
C = 1.0
RULE = ("bitwise where no tree reduction or exp/log/tanh feeds the element (NaN matches NaN); elsewhere "
        "|b - s| <= u*L*S + L*eta + A (S: sum of |contributions|, L: longest rounding chain, A: propagated "
        "error of non-linear ops; exp/log/tanh 4 ulp f32/f64, 1 ulp f16/bf16); specials by class")


@dataclass(frozen=True)
class Mismatch:
    tensor: str
    index: tuple[int, ...]
    interp: Any  # the expected value (the specification's, or the scheduled program's for the lowering link)
    backend: Any  # the value compared with it
    tolerance: float
    labels: tuple[str, str] = ("spec", "backend")

    def __str__(self) -> str:
        tol = "bitwise" if self.tolerance == 0 else f"tol {self.tolerance:.3g}"
        return f"{self.tensor}{list(self.index)}: {self.labels[0]} {self.interp!r}, {self.labels[1]} " \
               f"{self.backend!r} ({tol})"


# ----------------------------------------------------------------------------- inputs
SIZE_RANGE = (1, 12)


def _float_edges(dtype: str) -> np.ndarray:
    big = LARGEST[dtype]
    tiny = UNDERFLOW[dtype]
    normal = float(np.finfo(np.float16).tiny) if dtype == "f16" else (
        float(np.finfo(np.float64).tiny) if dtype == "f64" else float(np.finfo(np.float32).tiny))
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, tiny * 3, normal, -normal, normal / 2,
            big, -big, big / 2, -np.sqrt(big), np.sqrt(big), 1e4, -1e4]
    arr = np.array(vals, np.float64)
    return round_bf16(arr) if dtype == "bf16" else arr.astype(dtype_of(dtype).storage)


def _int_edges(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype_of(dtype).storage)
    lo, hi = int(info.min), int(info.max)
    vals = {0, 1, -1, lo, hi, lo + 1, hi - 1, hi // 2, lo // 2, hi // 2 + 1}
    return np.array(sorted(v for v in vals if lo <= v <= hi), dtype_of(dtype).storage)


def edge_values(dtype: str) -> np.ndarray:
    """The edge values of a dtype: for floats 0, -0, +-inf, NaN, subnormals, the smallest normal,
    the largest finite value and other large magnitudes; for integers 0, +-1, INT_MIN, INT_MAX
    and their neighbours and halves; for bools both."""
    dt = dtype_of(dtype)
    if dt.is_bool:
        return np.array([False, True])
    return _float_edges(dt.name) if dt.is_float else _int_edges(dt.name)


def random_array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...], edge: bool = False) -> np.ndarray:
    """Normal draws: floats standard normal, integers uniform over the whole range for 8-bit
    types and over [-1000, 1000] otherwise, bools fair coins. With ``edge``, between one cell
    and a quarter of the cells (at random positions) hold random edge values of the dtype."""
    dt = dtype_of(dtype)
    check_allocation(shape, 8, f"a random {dtype} input")  # drawn as 8-byte values, then converted
    if dt.is_bool:
        arr = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif dt.is_float:
        arr = rng.standard_normal(shape).astype(np.float64)
        arr = round_bf16(arr) if dt.name == "bf16" else arr.astype(dt.storage)
    else:
        info = np.iinfo(dt.storage)
        lo, hi = (int(info.min), int(info.max)) if info.bits == 8 else (-1000, 1000)
        arr = rng.integers(lo, hi, size=shape, endpoint=True).astype(dt.storage)
    if edge and arr.size:
        count = int(rng.integers(1, max(1, arr.size // 4), endpoint=True))
        cells = rng.choice(arr.size, size=count, replace=False)
        edges = edge_values(dtype)
        arr.reshape(-1)[cells] = edges[rng.integers(0, len(edges), size=count)]
    return arr


def draw_inputs(rng: np.random.Generator, program: ir.Program, sizes: Mapping[str, int],
                edge: bool) -> dict[str, np.ndarray]:
    """Random contents for every tensor of ``program`` at ``sizes`` (outputs included: a kernel
    may read what it writes), drawn by ``random_array``."""
    return {t.name: random_array(rng, t.dtype, tuple(int(sizes[str(d)]) for d in t.shape), edge)
            for t in program.tensors}


# ----------------------------------------------------------------------------- shadows
@dataclass
class Shadow:
    """Per-element shadow channels (float64, F bool): S magnitude, A carried error, C additions of
    the flattened sum, D longest chain inside a term, F may differ. Arrays or broadcastable scalars."""

    S: Any
    A: Any = 0.0
    C: Any = 0.0
    D: Any = 0.0
    F: Any = False

    def settled(self) -> "Shadow":
        """Where the value cannot differ there is no error to carry."""
        F = np.asarray(self.F, bool)
        if not F.any():
            return Shadow(self.S, 0.0, 0.0, 0.0, F)
        return Shadow(self.S, np.where(F, self.A, 0.0), np.where(F, self.C, 0.0), np.where(F, self.D, 0.0), F)

    @property
    def L(self) -> Any:
        return np.add(self.C, self.D)


def bound(sh: Shadow, dtype: str) -> np.ndarray:
    """``T`` of a shadow for values of ``dtype``: 0 where the value cannot differ (bitwise), inf where
    unbounded, else at least ``BOUNDED`` (a tree ``max`` may differ only in the sign of a zero)."""
    dt = dtype_of(dtype)
    F = np.asarray(sh.F, bool)
    with np.errstate(all="ignore"):
        if dt.is_bool:
            T = np.where(F, np.inf, 0.0)
        elif dt.is_float:
            u, n = UNIT_ROUNDOFF[dt.name], sh.L
            T = C * u * n * sh.S + n * UNDERFLOW[dt.name] + sh.A
            over = sh.S * (1 + u * n) + sh.A > LARGEST[dt.name]
            T = np.where(over | np.isnan(T), np.inf, T)
        else:
            T = np.asarray(sh.A, np.float64)
            over = np.add(sh.S, sh.A) > float(np.iinfo(dt.storage).max)
            T = np.where(over | np.isnan(T), np.inf, T)
        return np.where(F, np.maximum(T, BOUNDED), 0.0)


def _mag(v: Any) -> np.ndarray:
    a = np.abs(np.asarray(v, np.float64))
    return np.where(np.isfinite(a), a, 0.0)


def _f64(v: Any) -> np.ndarray:
    return np.asarray(v, np.float64)


def reassociated(st: L.Accum, dtype: str) -> bool:
    """Whether evaluations may associate the float updates of ``st`` differently: a tree policy, or
    a contribution that is a product formed in the update (an ``mma``: the specification contracts
    it as one product, in any order, whatever the enclosing region's policy)."""
    mma = isinstance(st.value, L.Bin) and st.value.fn == "mul"
    return dtype_of(dtype).is_float and (st.policy in TREES or mma)


class ShadowInterpreter(LoopInterpreter):
    """The loop interpreter (unchecked) with a ``Shadow`` per buffer cell, updated beside every
    store and update by the rules of the module docstring."""

    def __init__(self, p: ir.Program, sizes: Mapping[str, int], tensors: dict[str, np.ndarray]) -> None:
        super().__init__(p, sizes, tensors, checked=False)
        self.shadows: dict[str, dict[str, np.ndarray]] = {
            name: self._zeros(arr, _mag(arr)) for name, arr in tensors.items()}

    @staticmethod
    def _zeros(arr: np.ndarray, S: Optional[np.ndarray] = None) -> dict[str, np.ndarray]:
        z = {ch: np.zeros(arr.shape, np.float64) for ch in "SACD"}
        z["F"] = np.zeros(arr.shape, bool)
        if S is not None:
            z["S"] = S
        return z

    def channels(self, buf: str) -> dict[str, np.ndarray]:
        chans = self.shadows[buf]
        return {k: v.reshape(1) for k, v in chans.items()} if self.bufs[buf][0].ndim == 0 else chans

    # ------------------------------------------------------------------ statements
    def st_Decl(self, st: L.Decl) -> None:
        super().st_Decl(st)
        self.shadows[st.buf.name] = self._zeros(self.bufs[st.buf.name][0])

    def binding(self, name: str) -> tuple:
        return super().binding(name), self.shadows[name]

    def rebind(self, name: str, state: tuple) -> None:
        super().rebind(name, state[0])
        self.shadows[name] = state[1]

    def _target(self, st) -> Optional[tuple[np.ndarray, tuple, Shadow]]:
        active = self.full_mask()
        if not active.any():
            return None
        sh = self.shadow(st.value, active, st.loc).settled()
        _, parts = self.cells(st.buf, st.index, active, st.loc, "store")
        return active, tuple(p[active] for p in parts), sh

    def st_Assign(self, st: L.Assign) -> None:
        target = self._target(st)
        super().st_Assign(st)
        if target is not None:
            active, sel, sh = target
            chans = self.channels(st.buf)
            for ch in "SACDF":
                chans[ch][sel] = np.broadcast_to(getattr(sh, ch), active.shape)[active]

    def st_Accum(self, st: L.Accum) -> None:
        target = self._target(st)
        super().st_Accum(st)
        if target is None:
            return
        active, sel, sh = target
        chans = self.channels(st.buf)
        v = {ch: np.broadcast_to(getattr(sh, ch), active.shape)[active] for ch in "SACDF"}
        np.logical_or.at(chans["F"], sel, v["F"] | reassociated(st, self.dtypes[st.buf]))
        if st.op == "add":
            np.add.at(chans["S"], sel, v["S"])
            np.add.at(chans["A"], sel, v["A"])
            np.add.at(chans["C"], sel, v["C"] + 1)
            np.maximum.at(chans["D"], sel, v["D"] + 1)  # a term may be rounded or kept wide (the spec's bf16 mma)
        elif st.op == "mul":
            T = bound(Shadow(v["S"], v["A"], v["C"], v["D"], v["F"]), self.dtypes[st.buf])
            np.multiply.at(chans["A"], sel, v["S"] + T)
            np.add.at(chans["A"], sel, np.where(v["A"] > 0, np.inf, 0.0))
            np.multiply.at(chans["S"], sel, v["S"])
            np.add.at(chans["D"], sel, v["C"] + v["D"] + 1)
        else:  # max / min: exact, Lipschitz 1 in each argument
            for ch in "SACD":
                np.maximum.at(chans[ch], sel, v[ch])

    # ------------------------------------------------------------------ expressions
    def shadow(self, e: L.SExpr, active: np.ndarray, loc) -> Shadow:
        """The shadow of ``e`` on the active lanes (the value comes from the interpreter's ``expr``)."""
        if isinstance(e, L.Ld):
            _, parts = self.cells(e.buf, e.index, active, loc, "load")
            chans = self.channels(e.buf)
            return Shadow(*(chans[ch][parts] for ch in "SACDF")).settled()
        if isinstance(e, (L.Lit, L.Ix)):
            return Shadow(_mag(self.expr(e, active, loc)))
        if isinstance(e, L.Cvt):
            return self._convert(e, active, loc)
        if isinstance(e, L.Un):
            return self._unary(e, active, loc)
        if isinstance(e, L.Bin):
            return self._binary(e, active, loc)
        if isinstance(e, L.Sel):
            return self._select(e, active, loc)
        raise TypeError(type(e).__name__)

    def _convert(self, e: L.Cvt, active, loc) -> Shadow:
        src, dst = dtype_of(e.x.dtype), dtype_of(e.dtype)
        x = self.shadow(e.x, active, loc)
        T = bound(x, src.name)
        if src.is_bool:
            return Shadow(np.ones_like(T), np.where(x.F, 1.0, 0.0), F=x.F)
        if dst.is_bool:
            xv = _f64(self.expr(e.x, active, loc))
            return Shadow(np.ones_like(T), F=x.F & ~(np.abs(xv) > T))
        if dst.is_float:
            rounds = src.is_int or UNIT_ROUNDOFF[dst.name] > UNIT_ROUNDOFF[src.name]
            return Shadow(x.S, T, D=np.where(x.F, float(rounds), 0.0), F=x.F).settled()
        if src.is_float:  # truncation toward zero: at most one unit beyond the operand's error
            xv = _f64(self.expr(e.x, active, loc))
            return Shadow(x.S, np.where(np.isfinite(xv), T + 1, np.inf), F=x.F).settled()
        return Shadow(x.S, T, F=x.F).settled()

    def _unary(self, e: L.Un, active, loc) -> Shadow:
        x = self.shadow(e.x, active, loc)
        if e.fn in ("neg", "abs", "not"):
            return x
        dt = e.dtype
        T = bound(x, dt)
        xv = _f64(self.expr(e.x, active, loc))
        f = MONOTONE[e.fn]
        with np.errstate(all="ignore"):
            y, lo, hi = f(xv), f(xv - T), f(xv + T)
            width = np.maximum(hi - y, y - lo)
            if e.fn in ("log", "sqrt"):
                width = np.where((T > 0) & (xv - T < 0), np.inf, width)
            top = np.maximum(np.abs(lo), np.abs(hi))
            ulps = LIBRARY_ULPS[dt] if e.fn in LIBRARY_FNS else 0.5
            A = width + ulps * (2 * UNIT_ROUNDOFF[dt] * top + 2 * UNDERFLOW[dt])
            # an exact operand whose image is special in every admitted evaluation: NaN or -inf of log /
            # sqrt outside their domain, or an exp beyond the dtype's range by more than the library's ulps
            beyond = np.abs(y) > LARGEST[dt] * (1 + 2 * ulps * UNIT_ROUNDOFF[dt])
            exact_special = (T == 0) & np.isfinite(xv) & (~np.isfinite(y) | beyond)
            special = (~np.isfinite(xv) & np.isfinite(T)) | exact_special  # specials propagate alike
            A = np.where(special, 0.0, np.where(np.isnan(A) | np.isinf(T), np.inf, A))  # inf: may be NaN
            S = np.where(special | np.isnan(top), 0.0, top)
        F = np.ones_like(np.asarray(x.F)) if e.fn in LIBRARY_FNS else x.F
        return Shadow(S, A, F=np.broadcast_to(F, np.shape(A)) | x.F).settled()

    def _binary(self, e: L.Bin, active, loc) -> Shadow:
        a, b = self.shadow(e.a, active, loc), self.shadow(e.b, active, loc)
        F = a.F | b.F
        opd = e.a.dtype
        fn = e.fn
        if fn in ("and", "or"):
            return Shadow(np.ones_like(np.add(a.S, b.S)), F=F)
        if fn in ("add", "sub"):
            return Shadow(a.S + b.S, a.A + b.A, a.C + b.C + 1, np.maximum(a.D, b.D), F).settled()
        if fn in ("min", "max"):
            return Shadow(np.maximum(a.S, b.S), np.maximum(a.A, b.A), np.maximum(a.C, b.C),
                          np.maximum(a.D, b.D), F).settled()
        Ta, Tb = bound(a, opd), bound(b, opd)
        if fn == "mul":
            with np.errstate(all="ignore"):
                A = a.S * b.A + b.S * a.A + Ta * Tb
            return Shadow(a.S * b.S, np.where(np.isnan(A), np.inf, A), 0.0, a.L + b.L + 1, F).settled()
        av, bv = _f64(self.expr(e.a, active, loc)), _f64(self.expr(e.b, active, loc))
        if fn in ("floordiv", "mod"):
            return Shadow(np.maximum(a.S, b.S), np.inf, F=F).settled()
        if fn == "div":
            with np.errstate(all="ignore"):
                room = np.abs(bv) - Tb
                A = (Ta * np.abs(bv) + np.abs(av) * Tb) / (np.abs(bv) * room)
                S = (np.abs(av) + Ta) / room
                special = ~(np.isfinite(av) & np.isfinite(bv)) & np.isfinite(Ta) & np.isfinite(Tb)
                A = np.where(special, 0.0, np.where((room <= 0) | np.isnan(A), np.inf, A))
                S = np.where(special | np.isnan(S), 0.0, S)
            return Shadow(S, A, 0.0, np.ones_like(S), F).settled()
        # comparisons: the bool may differ where the operands' intervals overlap
        with np.errstate(all="ignore"):
            apart = np.abs(av - bv) > Ta + Tb
        return Shadow(np.ones_like(apart, np.float64), F=F & ~apart)

    def _select(self, e: L.Sel, active, loc) -> Shadow:
        cond = self.shadow(e.cond, active, loc)
        c = np.broadcast_to(np.asarray(self.expr(e.cond, active, loc), bool), active.shape)
        flip = active & np.broadcast_to(np.asarray(cond.F, bool), active.shape)
        a = self.shadow(e.a, active & (c | flip), loc)
        b = self.shadow(e.b, active & (~c | flip), loc)
        out = Shadow(*(np.where(c, getattr(a, ch), getattr(b, ch)) for ch in "SACDF"))
        if not flip.any():
            return out
        av, bv = _f64(self.expr(e.a, flip, loc)), _f64(self.expr(e.b, flip, loc))
        with np.errstate(all="ignore"):
            A = np.maximum(bound(a, e.dtype), bound(b, e.dtype)) + np.abs(av - bv)
            A = np.where(np.isnan(A), np.inf, A)
        return Shadow(np.where(flip, np.maximum(a.S, b.S), out.S), np.where(flip, A, out.A),
                      np.where(flip, 0.0, out.C), np.where(flip, 0.0, out.D), out.F | flip)


# ----------------------------------------------------------------------------- the oracle
@dataclass(frozen=True)
class Oracle:
    """Per written tensor: the bound ``T`` of each element (0: bitwise; inf: unbounded)."""

    dtypes: Mapping[str, str]
    bounds: Mapping[str, np.ndarray]
    rule: str = RULE

    def compare(self, name: str, expected: np.ndarray, got: np.ndarray) -> Optional[Mismatch]:
        """The first element of tensor ``name`` where ``got`` is not admitted beside ``expected``, or None."""
        T = self.bounds[name]
        e, g = np.asarray(expected), np.asarray(got)
        if e.shape != g.shape or e.shape != T.shape:
            return Mismatch(name, (), f"shape {e.shape}", f"shape {g.shape}", 0.0)
        if g.dtype != e.dtype:  # bit patterns of another type are not values of this one
            return Mismatch(name, (), f"dtype {e.dtype}", f"dtype {g.dtype}", 0.0)
        ok = _admitted(dtype_of(self.dtypes[name]), e, g, T)
        if ok.all():
            return None
        where = tuple(int(x) for x in np.argwhere(~ok)[0])
        return Mismatch(name, where, e[where].item(), g[where].item(), float(T[where]))

    def vacuous(self, name: str, expected: np.ndarray) -> int:
        """How many elements of ``name`` have a finite bound at least the largest finite magnitude of the
        tensor: there the admitted evaluations may differ by more than any value of it (zero, the negation
        and half of every value are all admitted), so a comparison says nothing (long narrow-float
        accumulations: ``u * L >= 1``)."""
        T, e = self.bounds[name], np.asarray(expected).astype(np.float64)
        finite = np.isfinite(e)
        if not dtype_of(self.dtypes[name]).is_float or not finite.any():
            return 0
        scale = float(np.max(np.abs(e[finite])))
        return int((np.isfinite(T) & (T > 0) & (T >= scale)).sum()) if scale > 0 else 0

    def counts(self, name: str) -> dict[str, int]:
        """How many elements of ``name`` compare bitwise, within a finite bound, or unbounded."""
        T = self.bounds[name]
        return {"bitwise": int((T == 0).sum()), "bounded": int(((T > 0) & np.isfinite(T)).sum()),
                "unbounded": int(np.isinf(T).sum())}


def _admitted(dt, e: np.ndarray, g: np.ndarray, T: np.ndarray) -> np.ndarray:
    exact = T == 0
    if not dt.is_float:
        with np.errstate(all="ignore"):
            near = np.abs(g.astype(np.float64) - e.astype(np.float64)) <= T
        return np.where(exact, e == g, near | np.isinf(T))
    bits = np.dtype(f"u{e.dtype.itemsize}")
    both_nan = np.isnan(e) & np.isnan(g)
    same = (e.view(bits) == g.view(bits)) | both_nan
    e64, g64 = e.astype(np.float64), g.astype(np.float64)
    finite = np.isfinite(e64) & np.isfinite(g64)
    with np.errstate(all="ignore"):
        near = finite & (np.abs(g64 - e64) <= T)
    special = both_nan | (np.isinf(e64) & (e64 == g64))
    return np.where(exact, same, near | special | np.isinf(T))


def oracle_for(program: ir.Program, sizes: Mapping[str, int], arrays: Mapping[str, np.ndarray]) -> Oracle:
    """The oracle of one trial: ``program`` (loop form, the kernel's meaning) run on copies of
    ``arrays`` at ``sizes`` with shadows. Raises ``ExecutionError`` where the program has no
    meaning on these inputs."""
    dims = {str(d) for t in program.tensors for d in t.shape}
    loose = {s: n for s, n in sizes.items() if s not in dims}
    data, bound_sizes = prepare_inputs(program, {**{k: np.array(v, copy=True) for k, v in arrays.items()}, **loose})
    it = ShadowInterpreter(program, {**bound_sizes, **loose}, data)
    it.run()
    out = {t.name: t.dtype for t in program.tensors if t.written}
    return Oracle(out, {name: bound(Shadow(*(it.shadows[name][ch] for ch in "SACDF")).settled(), dt)
                        for name, dt in out.items()})
