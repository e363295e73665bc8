"""The zero fill of a declared buffer is dropped only where every read follows a write (``lowering.fill``).

Independent reference: the loop interpreter run with every declared buffer filled with a
nonzero value instead of zero; where the proof drops a fill the outputs must not change,
and the twins that read an unwritten cell show that they do change there."""
import re

import numpy as np
import pytest
from hypothesis import given, reject

import test_checker_programs as P
import tilecert as tc
from benchmarks.gemm_c import best_schedule
from examples import EXAMPLES
from tilecert.backends.c import build
from tilecert.backends.c.emit import emit_c
from tilecert.backends.c.runner import CKernel
from tilecert.lowering import lower, validate
from tilecert.lowering.fill import written_first
from tilecert.lowering.program import Alloc, walk
from tilecert.semantics import ir, loopinterp
from tilecert.semantics import loopir as L
from tilecert.semantics.errors import TilecertError

N = 3


def staged(extent: int, written: int, first: str = "write", owner_guard: bool = False, update: bool = False):
    """``for i in [0, N): local T[extent]; for j < written: T[j] = X[i*extent + j] (or +=);
    for j < extent: Y[i*extent + j] = T[extent-1-j]`` (the read nest first when ``first == "read"``;
    the write nest only at ``i == 0`` with ``owner_guard``)."""
    i, j = P.v(0), P.v(1)
    cell = P.add(P.mul(i, extent), j)
    fill = (P.accum if update else P.assign)("T", (j,), P.ld("X", cell))
    write = P.loop(1, "w", written, fill, kind="parallel")
    if owner_guard:
        write = P.guard(P.lt(i, 1), write)
    read = P.loop(1, "r", extent, P.assign("Y", (cell,), P.ld("T", P.sub(extent - 1, j))), kind="parallel")
    nests = (write, read) if first == "write" else (read, write)
    shape = (P.mul("N", extent),)
    return P.program("staged", ("N",), [P.tensor("X", shape, written=False), P.tensor("Y", shape)],
                     P.loop(0, "i", "N", P.decl("T", (extent,)), *nests, kind="parallel"))


def interpreted(p, fill: int, x=None) -> dict[str, np.ndarray]:
    """``p`` on the interpreter with every declared buffer filled with ``fill`` (``P.run``'s random inputs,
    or ``X=x``)."""
    original = loopinterp.LoopInterpreter.st_Decl

    def st_decl(self, st):
        original(self, st)
        self.bufs[st.buf.name][0][...] = fill

    with pytest.MonkeyPatch.context() as m:
        m.setattr(loopinterp.LoopInterpreter, "st_Decl", st_decl)
        if x is None:
            return P.run(p, {"N": N})
        arrays = {"X": x.copy(), "Y": np.zeros_like(x)}
        loopinterp.interpret_loops(p, {"N": N}, arrays)
        return arrays


def compiled(p) -> tuple[str, CKernel]:
    sizes = {"N": N}
    lp = lower(p, sizes)
    source = emit_c(lp)
    return source, CKernel(p, lp, validate(p, lp, sizes), source, build.build(source, build.FLAGS, shared=True), False)


@pytest.mark.parametrize("extent", [4, 9000])  # on the stack, on the heap (over 32 KiB)
def test_a_buffer_written_before_it_is_read_is_left_unfilled_and_results_agree(extent):
    p = staged(extent, extent)
    assert written_first(p, {"N": N}) == {0}
    source, kernel = compiled(p)
    assert [a.zeroed for a in walk(kernel.lowered.body) if isinstance(a, Alloc)] == [False]
    decl = next(line for line in source.splitlines() if "local T" in line)
    assert "{0}" not in decl and "calloc" not in decl and "written before read" in decl
    assert ("malloc" in decl) == (extent == 9000)
    x = np.random.default_rng(1).integers(-4, 5, N * extent).astype(np.int32)
    want = interpreted(p, 0, x)["Y"]
    np.testing.assert_array_equal(want, x.reshape(N, extent)[:, ::-1].ravel())
    np.testing.assert_array_equal(interpreted(p, 7, x)["Y"], want)
    np.testing.assert_array_equal(kernel(X=x, Y=np.zeros_like(x))["Y"], want)


@pytest.mark.parametrize("twin", [
    dict(written=3),  # the last cell is never written: its read sees the fill
    dict(written=4, first="read"),  # read before the write
    dict(written=4, owner_guard=True),  # written in the first allocation only; the others are read fresh
    dict(written=4, update=True),  # T[j] += X[...] reads the fill
])
def test_a_buffer_read_before_a_write_keeps_its_fill(twin):
    p = staged(4, **twin)
    assert written_first(p, {"N": N}) == frozenset()
    source, kernel = compiled(p)
    decl = next(line for line in source.splitlines() if "local T" in line)
    assert re.search(r"\[4\] \S+ = \{0\};", decl)
    x = np.random.default_rng(2).integers(-4, 5, N * 4).astype(np.int32)
    want = interpreted(p, 0, x)["Y"]
    assert not np.array_equal(interpreted(p, 7, x)["Y"], want)  # the fill is observable
    np.testing.assert_array_equal(kernel(X=x, Y=np.zeros_like(x))["Y"], want)


def _example_gemm():
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=13, N=11, K=9, bm=4, bn=8, bk=4)
    s.bind("nest.0", "grid0")
    s.bind("C.store.N", "vector")
    return s


@pytest.mark.parametrize("schedule", [_example_gemm, lambda: best_schedule(256)], ids=["example", "benchmark"])
def test_gemm_schedules_drop_every_fill_and_stay_bitwise_equal(schedule):
    s = schedule()
    m, n, k = (s.sizes[x] for x in ("M", "N", "K"))
    kernel = tc.compile(s)
    allocs = [a for a in walk(kernel.lowered.body) if isinstance(a, Alloc)]
    assert allocs and not any(a.zeroed for a in allocs)
    assert "{0}" not in kernel.source.split("void tc_kernel")[1] and "calloc" not in kernel.source
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    want = np.zeros((m, n), np.float32)
    for j in range(k):  # the schedules' order: K ascending, each product rounded, then added
        want = want + a[:, j:j + 1] * b[j:j + 1, :]
    assert np.array_equal(kernel(A=a, B=b, C=np.zeros((m, n), np.float32))["C"], want)


@given(P.random_program().filter(lambda p: any(isinstance(s, L.Decl) for s in ir.walk(p.body))))
def test_a_dropped_fill_is_unobservable_on_random_programs(p):
    """Brute force: wherever the proof drops the fill of ``T``, a nonzero fill changes no output."""
    try:
        want = P.run(p, {"N": N})
    except TilecertError:  # a racy or out-of-bounds draw: no meaning to compare
        reject()
    if written_first(p, {"N": N}):
        for fill in (7, -3):
            got = interpreted(p, fill)
            for name in want:
                np.testing.assert_array_equal(got[name], want[name])
