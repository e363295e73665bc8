"""Hypothesis strategies for tile programs and their schedules.

``kernels()`` draws a small random kernel written in the DSL together with matching
integer inputs (a ``KernelCase``). The kernel is a real ``@tc.kernel``: its source text is
generated, registered with ``linecache`` (the capture reads a kernel's source) and
executed. The generated kernels combine

- a parallel grid over output tiles (1-D or 2-D, optionally a nested parallel split of the
  row blocks, optionally bound to block / thread scopes), or a grid over row blocks that
  walks the columns with inner loops;
- elementwise chains over tile loads (ragged extents, shifted origins that leave the
  tensor, ``bounds="zero"``, fallbacks), index tiles, scalar descents and constants, with
  broadcasting by dim identity (``where``, ``maximum``, casts, ...);
- ``tc.reduce`` over a dim with every policy (built-in and custom combiners);
- ``mma`` accumulations;
- serial / pipeline (with stage cuts) / reduce regions carrying one or two states, with
  updates that every policy admits (merges for trees, anything for folds and serial);
- explicit memories.

Everything is ``i32`` (values in [-4, 4]), so interpreters must agree bit for bit.

``schedules(kernel, ...)`` draws a ``Schedule``: a sequence of ops taken from whatever
``semantics.sched.OPS`` holds when it runs, each with arguments drawn from the op's
declared argument kinds and the current loop tree (``op_calls``). A draw whose op raises
``ScheduleError`` (a precondition does not hold) is skipped; any other exception is a bug
and propagates.
"""
from __future__ import annotations

import functools
import hashlib
import itertools
import linecache
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
from hypothesis import event, strategies as st

from tilecert.semantics import ir
from tilecert.semantics import loopir as L
from tilecert.semantics.kernel import Kernel
from tilecert.semantics.sched import OPS, OpDecl
from tilecert.schedule import Schedule
from tilecert.semantics.sched.args import Draw
from tilecert.semantics.sched.base import ScheduleError

__all__ = ["KernelCase", "kernels", "kernel_from_source", "op_calls", "schedules", "gpu_schedules", "TENSOR_DIMS"]

# every tensor a generated kernel may use, with its dims (equal names are one dim)
TENSOR_DIMS: dict[str, tuple[str, ...]] = {
    "A": ("M", "N"), "V": ("N",), "W": ("M",), "P": ("M", "K"), "Q": ("K", "N"),
    "Y": ("M", "N"), "Yn": ("N",), "Z": ("M",),
}
_BLOCK = {"M": "bm", "N": "bn", "K": "bk"}
VALUE_RANGE = (-4, 4)


@dataclass(frozen=True)
class KernelCase:
    """A generated kernel with sizes and integer inputs (outputs start with random contents)."""

    kernel: Kernel
    source: str
    sizes: dict[str, int]
    arrays: dict[str, np.ndarray]
    outputs: tuple[str, ...]

    def inputs(self) -> dict[str, np.ndarray]:
        """Fresh copies of every tensor, by name (keyword arguments for ``tc.run``)."""
        return {name: arr.copy() for name, arr in self.arrays.items()}


@functools.lru_cache(maxsize=None)
def kernel_from_source(source: str, name: str = "generated") -> Kernel:
    """The ``@tc.kernel`` named ``name`` defined by ``source`` (compiled once per text)."""
    filename = f"<tilecert-generated-{hashlib.sha1(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": filename}
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102
    return namespace[name]


# ----------------------------------------------------------------------------- kernel text
class _Writer:
    """Builds the body of one kernel: statements, the tensors they use, and the names in scope.

    ``have`` maps a dim to True when its tile origin (``m0`` / ``n0``) is defined here;
    expressions only use dims whose origin is in scope. ``leaves`` holds named values
    (carried results) that expressions may read, with their dims.
    """

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self.draw = draw
        self.lines: list[str] = []
        self.depth = 1
        self.used: set[str] = set()
        self.counter = itertools.count()
        self.have: dict[str, bool] = {}
        self.m0_in_range = True
        self.k: Optional[str] = None  # the handle of the innermost K loop in scope
        self.k_in_range = False  # its index is < K (assume-bounds scalar descents are safe)
        self.leaves: list[tuple[str, frozenset[str]]] = []

    # -------------------------------------------------------------- plumbing
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def fresh(self, base: str = "t") -> str:
        return f"{base}{next(self.counter)}"

    def let(self, code: str, dims: frozenset[str]) -> tuple[str, frozenset[str]]:
        name = self.fresh()
        self.emit(f"{name} = {code}")
        return name, dims

    def tensor(self, name: str) -> str:
        self.used.add(name)
        return name

    def small(self, lo: int = -3, hi: int = 3) -> int:
        return self.draw(st.integers(lo, hi))

    def shifted(self, base: str, lo: int, hi: int) -> str:
        """``base`` plus a drawn offset in [lo, hi]."""
        c = self.small(lo, hi)
        return base if c == 0 else f"{base} {'+' if c > 0 else '-'} {abs(c)}"

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(st.sampled_from(list(options)))

    @staticmethod
    def shape_dims(dims: frozenset[str]) -> str:
        """``(shape), dims=(names)`` of the canonical tile over ``dims`` (M before N)."""
        order = [d for d in ("M", "N") if d in dims]
        shape = "".join(f"{_BLOCK[d]}, " for d in order)
        names = "".join(f'"{d}", ' for d in order)
        return f"({shape}), dims=({names})"

    def zeros(self, dims: frozenset[str]) -> str:
        return f"tc.zeros(i32, {self.shape_dims(dims)})"

    def fit(self, value: tuple[str, frozenset[str]], dims: frozenset[str]) -> str:
        """A named value: ``value`` broadcast to exactly the canonical tile type over ``dims``."""
        return self.let(f"{self.zeros(dims)} + {value[0]}", dims)[0]

    # -------------------------------------------------------------- leaves
    def leaf_options(self, allowed: frozenset[str]) -> list[tuple[frozenset[str], Callable[[], str]]]:
        opts: list[tuple[frozenset[str], Callable[[], str]]] = []
        hm, hn = self.have.get("M", False), self.have.get("N", False)
        if hm and hn:
            opts.append((frozenset("MN"), self.load_a))
        if hn:
            opts.append((frozenset("N"), lambda: f"{self.tensor('V')}.tile(({self.shifted('n0', -2, 2)},), "
                                                 "(bn,)).load()"))
            opts.append((frozenset("N"), lambda: 'n0 + tc.iota(i32, (bn,), dims=("N",))'))
            opts.append((frozenset(), lambda: f"{self.tensor('V')}.at({self.shifted('n0', -2, 2)}).load()"))
            opts.append((frozenset(), lambda: f"tc.zeros(i32, ()) + {self.shifted('n0', -1, 1)}"))  # an index value
        if hm:
            opts.append((frozenset("M"), lambda: f"{self.tensor('W')}.tile(({self.shifted('m0', -2, 2)},), "
                                                 "(bm,)).load()"))
            opts.append((frozenset("M"), lambda: 'm0 - tc.iota(i32, (bm,), dims=("M",))'))
            if self.m0_in_range:
                opts.append((frozenset(), lambda: f'{self.tensor("W")}.at(m0, bounds="assume").load()'))
        opts.append((frozenset(), lambda: f"tc.full(i32, (), {self.small()})"))
        if self.k is not None:
            k = self.k
            if hm:
                opts.append((frozenset("M"), lambda: self.reduce_text(
                    f"{self.tensor('P')}.tile(({self.shifted('m0', -1, 1)}, k0), (bm, bk)).load()", "K")))
                if self.k_in_range and self.m0_in_range:
                    opts.append((frozenset(), lambda: f'{self.tensor("P")}.at(m0, {k}.index(0), '
                                                      'bounds="assume").load()'))
            if hn:
                opts.append((frozenset("N"), lambda: self.reduce_text(
                    f"{self.tensor('Q')}.tile((k0, {self.shifted('n0', -1, 1)}), (bk, bn)).load()", "K")))
            if hm and hn:  # a stencil tap: the tile shifted by the loop index
                opts.append((frozenset("MN"), lambda: f"{self.tensor('A')}.tile((m0 + {k}.index(0) - 1, n0), "
                                                      "(bm, bn)).load()"))
            elif hn:
                opts.append((frozenset("N"), lambda: f"{self.tensor('V')}.tile((n0 - {k}.index(0) + 1,), "
                                                     "(bn,)).load()"))
        opts.extend((dims, (lambda name=name: name)) for name, dims in self.leaves)
        return [(d, f) for d, f in opts if d <= allowed]

    def load_a(self) -> str:
        """A shifted ``(bm, bn)`` tile of ``A``, maybe with a fallback for the cells outside ``A``."""
        fallback = f"fallback={self.small()}" if self.draw(st.booleans()) else ""
        origin = f"{self.shifted('m0', -2, 2)}, {self.shifted('n0', -2, 2)}"
        return f"{self.tensor('A')}.tile(({origin}), (bm, bn)).load({fallback})"

    def reduce_text(self, operand: str, dim: str) -> str:
        policy = self.pick(ir.POLICIES)
        combiner = self.draw(st.sampled_from(["add", "max", "min", "custom"]))
        if combiner != "custom":
            return f'tc.reduce({operand}, "{dim}", "{combiner}", policy="{policy}")'
        if policy in ("fold_left", "fold_right"):
            fn = self.pick(["lambda a, b: a - b", "lambda a, b: a * 2 + b", "lambda a, b: tc.maximum(a, b) - 1"])
        else:  # trees admit any bracketing (and order): the combiner must be associative and commutative
            fn = self.pick(["lambda a, b: a + b", "lambda a, b: tc.maximum(a, b)"])
        return f'tc.reduce({operand}, "{dim}", {fn}, policy="{policy}", init={self.small()})'

    # -------------------------------------------------------------- expressions
    def expr(self, allowed: frozenset[str], depth: int = 2) -> tuple[str, frozenset[str]]:
        """A named value whose dims are a subset of ``allowed``."""
        kinds = ["leaf"] + (["binary", "binary", "unary", "where", "reduce"] if depth > 0 else [])
        kind = self.pick(kinds)
        if kind == "leaf":
            dims, make = self.pick(self.leaf_options(allowed))
            return self.let(make(), dims)
        if kind == "binary":
            a = self.expr(allowed, depth - 1)
            if self.draw(st.booleans()):
                b = self.expr(allowed, depth - 1)
                btext, bdims = b
            else:
                btext, bdims = str(self.small()), frozenset()
            op = self.pick(["+", "-", "*", "maximum", "minimum"])
            code = f"{a[0]} {op} {btext}" if len(op) == 1 else f"tc.{op}({a[0]}, {btext})"
            return self.let(code, a[1] | bdims)
        if kind == "unary":
            a = self.expr(allowed, depth - 1)
            forms = ["-{}", "tc.abs({})", "tc.cast(tc.cast({}, i64), i32)", "tc.cast(tc.cast({}, i16), i32)"]
            if a[1] == frozenset("MN"):  # through a flat tile and back (row-major reindexing)
                forms.append('tc.reshape(tc.reshape({}, (bm * bn,)), (bm, bn), dims=("M", "N"))')
            return self.let(self.pick(forms).format(a[0]), a[1])
        if kind == "where":
            x, y, a = (self.expr(allowed, depth - 1) for _ in range(3))
            cond = f"{x[0]} {self.pick(['<', '<=', '==', '!=', '>'])} {y[0]}"
            origins = [o for d, o in (("M", "m0"), ("N", "n0")) if self.have.get(d)]
            shape = self.pick(["tile", "not", "and", "or", "index"] if origins else ["tile", "not", "and", "or"])
            if shape == "not":
                cond = f"~({cond})"
            elif shape in ("and", "or"):
                cond = f"({cond}) {'&' if shape == 'and' else '|'} ({y[0]} != {self.small()})"
            elif shape == "index":  # a condition on coordinates only: a bool index value
                o = self.pick(origins)
                cond = f"{self.shifted(o, 0, 2)} < {'M' if o == 'm0' else 'N'}"
            dims = a[1] | (frozenset() if shape == "index" else x[1] | y[1])
            return self.let(f"tc.where({cond}, {a[0]}, {self.small()})", dims)
        dims = [d for d in ("M", "N") if self.have.get(d)]
        if not dims:
            return self.expr(allowed, 0)
        dim = self.pick(dims)
        inner = self.expr(allowed | {dim}, depth - 1)
        if dim not in inner[1]:
            seed = self.leaf_with(dim, allowed | {dim})
            inner = self.let(f"{inner[0]} + {seed[0]}", inner[1] | seed[1])
        return self.let(self.reduce_text(inner[0], dim), inner[1] - {dim})

    def leaf_with(self, dim: str, allowed: frozenset[str]) -> tuple[str, frozenset[str]]:
        """A named leaf that has ``dim`` (and no dim outside ``allowed``)."""
        opts = [(d, f) for d, f in self.leaf_options(allowed) if dim in d]
        dims, make = self.pick(opts)
        return self.let(make(), dims)

    # -------------------------------------------------------------- carried loops
    def carried(self, parent: str, acc_dims: frozenset[str], contribution: Callable[[], tuple[str, frozenset[str]]],
                extent: str, setup: Callable[[str], list[str]], k_loop: bool) -> list[tuple[str, frozenset[str]]]:
        """A serial / pipeline / reduce region over ``extent`` carrying one or two states of ``acc_dims``.

        ``contribution()`` writes one per-iteration value (it may read the states, which are
        leaves here, unless the region is a tree reduction); ``setup(handle)`` gives the
        coordinate lines; a ``k_loop`` walks K tiles (``k0``). Returns the carried results.
        """
        kind = self.pick(["serial", "pipeline", "reduce"])
        policy = self.pick(ir.POLICIES) if kind == "reduce" else None
        strict = policy not in ("unordered_tree", "ordered_tree")  # any update; trees need merges
        n_states = self.draw(st.integers(1, 2))
        states = [self.fresh("acc") for _ in range(n_states)]
        for s in states:
            init = self.pick([self.zeros(acc_dims), f"{self.zeros(acc_dims)} + {self.small()}"])
            self.emit(f"{s} = {init}")
        handle = self.fresh("k")
        attrs = {"serial": "", "pipeline": ", window=2", "reduce": f', policy="{policy}"'}[kind]
        self.emit(f"for {handle} in {parent}.{kind}({extent}{attrs}):")
        self.depth += 1
        saved = (self.k, self.k_in_range, list(self.leaves))
        if k_loop:
            self.k, self.k_in_range = handle, extent == "tc.cdiv(K, bk)"
        for line in setup(handle):
            self.emit(line)
        if kind == "pipeline":
            self.emit(f'{handle}.stage("load")')
        if strict:  # the body may read the states
            self.leaves += [(s, acc_dims) for s in states]
        contributions = [contribution() for _ in states]
        if kind == "pipeline":
            self.emit(f'{handle}.stage("compute")')
        updates = []
        mma_ok = acc_dims == frozenset("MN") and k_loop and extent.startswith("tc.cdiv(K")
        for s, c in zip(states, contributions):
            x = self.fit(c, acc_dims)  # a contribution of exactly the state's type: a merge for trees
            forms = ["{s} + {x}", "tc.maximum({s}, {x})", "tc.minimum({s}, {x})", "{s} - {x}"]
            if strict:
                forms += ["{s} * 2 - {x}", "{x} - {s}", "tc.where({x} < {s}, {s} - 1, {x})"]
            if mma_ok:
                forms.append("mma")
            form = self.pick(forms)
            if form == "mma":
                a = f"{self.tensor('P')}.tile((m0, k0), (bm, bk)).load()"
                b = f"{self.tensor('Q')}.tile((k0, n0), (bk, bn)).load()"
                updates.append(f"tc.mma({a}, {b}, {s})")
            else:
                updates.append(form.format(s=s, x=x))
        if strict and n_states == 2 and self.draw(st.booleans()):
            updates.reverse()  # each state takes the other's update: all carries update at once
        self.emit(f"{', '.join(states)} = {', '.join(updates)}")
        self.depth -= 1
        self.k, self.k_in_range, self.leaves = saved
        return [(s, acc_dims) for s in states]


def _k_setup(handle: str) -> list[str]:
    return [f"k0 = {handle}.index(0) * bk"]


def _tiles(w: _Writer, draw: Callable[[st.SearchStrategy[Any]], Any], rank: int) -> tuple[str, ...]:
    """A grid over output tiles of ``Y`` (rank 2) or ``Yn`` (rank 1)."""
    nested = draw(st.booleans())
    outer_bind, inner_bind = (', bind="block"', ', bind="thread"') if nested and draw(st.booleans()) else ("", "")
    if rank == 2 and nested:
        w.emit(f"for outer in tc.parallel(tc.cdiv(M, bm * 2){outer_bind}):")
        w.emit(f"    for nest in outer.parallel(2, tc.cdiv(N, bn){inner_bind}):")
        w.depth += 2
        w.emit("m0 = (outer.index() * 2 + nest.index(0)) * bm")
        w.m0_in_range = False  # the last block pair may start past M
    elif rank == 2:
        w.emit("for nest in tc.parallel(tc.cdiv(M, bm), tc.cdiv(N, bn)):")
        w.depth += 1
        w.emit("m0 = nest.index(0) * bm")
    elif nested:
        w.emit(f"for outer in tc.parallel(tc.cdiv(N, bn * 2){outer_bind}):")
        w.emit(f"    for nest in outer.parallel(2{inner_bind}):")
        w.depth += 2
    else:
        w.emit("for nest in tc.parallel(tc.cdiv(N, bn)):")
        w.depth += 1
    w.emit("n0 = nest.index(1) * bn" if rank == 2 else
           ("n0 = (outer.index() * 2 + nest.index()) * bn" if nested else "n0 = nest.index() * bn"))
    grid = frozenset("MN") if rank == 2 else frozenset("N")
    w.have = {d: True for d in grid}
    if draw(st.booleans()):
        acc_dims = draw(st.sampled_from([grid, frozenset(), frozenset("N")]))
        extent = draw(st.sampled_from(["tc.cdiv(K, bk)", "3", "1", "0", "tc.cdiv(K, bk), 2"]))
        if "K" in extent:
            w.tensor("Q")  # defines the size K
        w.leaves += w.carried("nest", acc_dims, lambda: w.expr(acc_dims, 1), extent, _k_setup, True)
    out = w.expr(grid, 2)
    if draw(st.booleans()):
        mem = w.fresh("mem")
        w.emit(f"{mem} = tc.memory(i32, {w.shape_dims(grid)})")
        w.emit(f"{mem}.store({w.fit(out, grid)})")
        out = w.let(f"{mem}.load() + {w.expr(grid, 1)[0]}", grid)
    target, origin, shape = ("Y", "(m0, n0)", "(bm, bn)") if rank == 2 else ("Yn", "(n0,)", "(bn,)")
    w.emit(f"{w.tensor(target)}.tile({origin}, {shape}).store({w.fit(out, grid)})")
    return (target,)


def _rows(w: _Writer, draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[str, ...]:
    """A grid over row blocks: a carried loop over column tiles into ``Z``, then maybe a pass into ``Y``."""
    w.tensor("A")  # defines the size N
    w.emit("for nest in tc.parallel(tc.cdiv(M, bm)):")
    w.depth += 1
    w.emit("m0 = nest.index() * bm")
    w.have = {"M": True}
    acc_dims = draw(st.sampled_from([frozenset("M"), frozenset()]))

    def contribution() -> tuple[str, frozenset[str]]:
        w.have["N"] = True
        x = w.expr(frozenset("MN"), 1)
        if "N" not in x[1]:
            seed = w.leaf_with("N", frozenset("MN"))
            x = w.let(f"{x[0]} + {seed[0]}", x[1] | seed[1])
        red = w.let(w.reduce_text(x[0], "N"), x[1] - {"N"})
        if not red[1] <= acc_dims:
            red = w.let(w.reduce_text(red[0], "M"), frozenset())
        return red

    states = w.carried("nest", acc_dims, contribution, "tc.cdiv(N, bn)", lambda h: [f"n0 = {h}.index() * bn"], False)
    w.have["N"] = False
    w.leaves += states
    col = w.expr(frozenset("M"), 1)
    w.emit(f"{w.tensor('Z')}.tile((m0,), (bm,)).store({w.fit(col, frozenset('M'))})")
    if not draw(st.booleans()):
        return ("Z",)
    j = w.fresh("j")
    w.emit(f"for {j} in nest.serial(tc.cdiv(N, bn)):")
    w.depth += 1
    w.emit(f"n0 = {j}.index() * bn")
    w.have["N"] = True
    out = w.expr(frozenset("MN"), 2)
    w.emit(f"{w.tensor('Y')}.tile((m0, n0), (bm, bn)).store({w.fit(out, frozenset('MN'))})")
    return ("Z", "Y")


def _source(draw: Callable[[st.SearchStrategy[Any]], Any]) -> tuple[str, tuple[str, ...]]:
    """The text of one kernel and the names of the tensors it writes."""
    w = _Writer(draw)
    family = draw(st.sampled_from(["tiles2d", "tiles1d", "rows"]))
    outputs = _rows(w, draw) if family == "rows" else _tiles(w, draw, 2 if family == "tiles2d" else 1)
    used = [t for t in TENSOR_DIMS if t in w.used]
    params = ", ".join(f'{t}: tc.Tensor[i32, {", ".join(repr(d) for d in TENSOR_DIMS[t])}]' for t in used)
    blocks = ", ".join(f"{_BLOCK[d]}: int = {draw(st.integers(1, 4))}" for d in ("M", "N", "K"))
    lines = ["import tilecert as tc", "from tilecert import i16, i32, i64", "", "", "@tc.kernel",
             f"def generated({params}, {blocks}):"]
    defined: set[str] = set()
    for t in used:
        for axis, d in enumerate(TENSOR_DIMS[t]):
            if d not in defined:
                defined.add(d)
                lines.append(f"    {d} = {t}.shape[{axis}]")
    return "\n".join(lines + w.lines) + "\n", outputs


@st.composite
def kernels(draw: Callable[[st.SearchStrategy[Any]], Any], max_size: int = 9) -> KernelCase:
    """A random small ``@tc.kernel`` over ``i32`` tensors, with sizes in [1, max_size] and inputs."""
    source, outputs = _source(draw)
    k = kernel_from_source(source)
    sizes = {name: draw(st.integers(1, max_size), label=f"size {name}") for name in k.size_names}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1), label="data seed"))
    lo, hi = VALUE_RANGE
    arrays = {name: rng.integers(lo, hi + 1, size=tuple(sizes[d] for d in spec.dims), dtype=np.int32)
              for name, spec in k.tensors.items()}
    return KernelCase(k, source, sizes, arrays, outputs)


# ----------------------------------------------------------------------------- schedules
@st.composite
def op_calls(draw: Callable[[st.SearchStrategy[Any]], Any], p: ir.Program, sizes: Optional[Mapping[str, int]] = None,
             ops: Optional[Mapping[str, OpDecl]] = None) -> tuple[str, dict[str, Any]]:
    """An op name and keyword arguments for it, drawn for the loop tree of ``p`` (``sizes``: the bound ones).

    Each argument is drawn from its declared kind (``semantics/sched/args.py``), in the op's
    parameter order, so a kind's strategy sees the arguments drawn before it: loop names among
    the loops (a loop declared ``inside`` another parameter's loop is often one directly inside
    it), buffer names among the buffers, new loop names among the loops and a few fresh names,
    choices of an ``Enum``, small ints, lists of one length (the length of the parameter a list
    declares ``length_of``; runs of directly nested loops, permuted, for loop lists), points
    inside a loop's range and extents that multiply to it for lists declared ``within`` /
    ``product_of`` a loop. A parameter with a default keeps it half of the time; supplied
    parameters (``bound_sizes``) are the ``Schedule``'s. An op with a required parameter of which
    this program offers no value (no loop, no run of nested loops) is not drawn.
    """
    table = dict(OPS if ops is None else ops)
    empty = Draw(p, dict(sizes or {}), {})
    candidates = [name for name in sorted(table)
                  if all(q.kind.strategy(empty) is not None for q in table[name].recorded if q.required)]
    if not candidates:
        raise ScheduleError("no registered schedule op can be drawn for this program",
                            hint="declare each op's argument kinds with @schedule_op (semantics/sched/registry.py)")
    name = draw(st.sampled_from(candidates))
    kwargs: dict[str, Any] = {}
    for q in table[name].recorded:
        if not q.required and draw(st.booleans()):
            continue
        values = q.kind.strategy(Draw(p, dict(sizes or {}), dict(kwargs)))
        if values is not None:
            kwargs[q.name] = draw(values, label=f"{name}.{q.name}")
    return name, kwargs


@st.composite
def schedules(draw: Callable[[st.SearchStrategy[Any]], Any], kernel: Kernel,
              sizes: Optional[Mapping[str, int]] = None, config: Optional[Mapping[str, Any]] = None,
              max_ops: int = 4) -> Schedule:
    """A ``Schedule`` of ``kernel`` (``sizes`` bound, the rest symbolic) after up to ``max_ops``
    drawn ops; draws whose op raises ``ScheduleError`` are skipped."""
    s = Schedule.create(kernel, **(sizes or {}), **(config or {}))
    for _ in range(draw(st.integers(0, max_ops), label="ops")):
        op, kwargs = draw(op_calls(s.program, s.sizes))
        try:
            s.apply(op, **kwargs)
        except ScheduleError:
            event(f"{op}: precondition failed")
            continue
        event(f"{op}: applied")
    return s


GPU_SLOTS = ("grid0", "grid1", "grid2", "block0", "block1", "block2", "warp", "lane")
_GPU_SIZES = (1, 2, 5, 9, 40, 1100, 70000)  # some loops then exceed the block / grid limits


@st.composite
def gpu_schedules(draw: Callable[[st.SearchStrategy[Any]], Any], max_ops: int = 6) -> Schedule:
    """A ``Schedule`` of a random kernel (``kernels()``) with its sizes bound (some beyond the CUDA limits) and up
    to ``max_ops`` ops that bind loops to grid / block slots, warp and lane, or split a loop first (factors
    around the warp size) so that its parts can be bound; draws an op refuses are skipped."""
    case = draw(kernels())
    sizes = {n: draw(st.sampled_from(_GPU_SIZES), label=f"size {n}") for n in case.kernel.size_names}
    s = Schedule.create(case.kernel, **sizes)
    for _ in range(draw(st.integers(1, max_ops), label="ops")):
        names = [lp.name for lp in L.loops(s.program.body)]
        loop = draw(st.sampled_from(names), label="loop")
        try:
            if draw(st.integers(0, 3), label="split first") == 0:
                s.split(loop, draw(st.sampled_from([2, 16, 32, 33])))
                event("split: applied")
                continue
            s.bind(loop, draw(st.sampled_from(GPU_SLOTS), label="slot"))
            event("bind: applied")
        except ScheduleError:
            event("gpu op: precondition failed")
    return s
