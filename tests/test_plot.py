"""``tc.plot``: iteration spaces, witnesses and barrier phases, held against the cells and instances
the programs define (counted here independently of the enumeration the pictures use)."""
from __future__ import annotations

import importlib

import pytest

pytest.importorskip("matplotlib", reason="tc.plot needs the plot extra (matplotlib)")

import tilecert as tc  # noqa: E402
from test_checker_programs import assign, barrier, ld, loop, program, tensor, v  # noqa: E402
from tilecert.pictures import PlotError  # noqa: E402

from examples.gemm import gemm  # noqa: E402
from examples.gemm_gpu import gemm_gpu  # noqa: E402
from examples.shift import swapped  # noqa: E402


def points(ax) -> list[tuple[int, int]]:
    return [(int(x), int(y)) for x, y in ax.collections[0].get_offsets()]


def test_the_space_of_the_gemm_store_is_its_output_cells_coloured_by_tile():
    s = tc.schedule(gemm, M=8, N=10, K=8, bm=4, bn=5, bk=4)
    fig = tc.plot(s)
    ax = fig.axes[0]
    drawn = points(ax)
    assert sorted(drawn) == sorted((n, m) for m in range(8) for n in range(10))  # every C cell once
    colours = ax.collections[0].get_array()
    tile_of = {(n, m): (m // 4, n // 5) for m in range(8) for n in range(10)}
    by_tile: dict = {}
    for p, c in zip(drawn, colours):
        by_tile.setdefault(tile_of[p], set()).add(float(c))
    assert len(by_tile) == 4 and all(len(c) == 1 for c in by_tile.values())  # one colour per 4 x 5 tile
    assert len({next(iter(c)) for c in by_tile.values()}) == 4  # and distinct tiles differ
    assert [t.get_text().split(":")[0].strip() for t in fig.axes[1].texts[1:]] == \
        ["nest.0", "nest.1", "C.store.M", "C.store.N"]


def test_the_loops_panel_colours_each_loop_by_its_binding():
    fig = tc.plot(gemm_gpu(32))
    colours = {t.get_text().split(":")[0].strip(): t.get_color() for t in fig.axes[1].texts[1:]}
    assert colours == {"nest.0": "tab:blue", "nest.1": "tab:blue", "C.store.M": "tab:orange",
                       "C.store.N": "tab:orange"}  # grid1 / grid0, then block1 / block0


def test_a_race_witness_marks_its_two_instances_on_the_space():
    s = tc.schedule(gemm, M=8, N=8, K=8, bm=4, bn=4, bk=4)
    s.bind("k", "core")
    bad = next(r for r in s.check() if r.status == "disproved")
    assert bad.kind == "noninterference"
    fig = tc.plot(s, bad)
    ax = fig.axes[0]
    marks = {t.get_text(): t.xy for t in ax.texts}
    a, b = (dict(i.coords) for i in bad.verdict.witness.instances)
    # the loops k (bound to core, where they differ) and acc.mma.p0 are the columns, k most significant
    assert marks["A"] == (a["k"] * 4 + a["acc.mma.p0"], a["acc.mma.p1"])
    assert marks["B"] == (b["k"] * 4 + b["acc.mma.p0"], b["acc.mma.p1"])
    assert marks["A"] != marks["B"]
    notes = fig.axes[-1].texts[0].get_text()
    assert "cell: acc[0, 0]" in notes and "CONFIRMED" in notes


def test_a_dependence_witness_draws_old_and_new_programs():
    bad = next(r for r in swapped.check() if r.status == "disproved")
    fig = tc.plot(swapped, bad)
    titles = [ax.get_title() for ax in fig.axes if ax.collections]
    assert len(titles) == len(bad.verdict.witness.instances) == 4
    assert [t.split()[0] for t in titles] == ["old", "old", "new", "new"]


def test_the_phases_of_the_gpu_gemm_are_its_thread_loops():
    fig = tc.plot(gemm_gpu(32), view="phases")
    ax = fig.axes[0]
    widths = [round(p.get_width()) for p in ax.patches]
    assert widths == [16 * 16] * 5  # fill, two loads, mma, store: each by every thread of the block
    ends = [t.get_text() for t in ax.texts if "threads loop" in t.get_text()]
    assert len(ends) == 5 and all("implicit" in e for e in ends)


def test_an_explicit_barrier_ends_a_phase():
    body = loop(0, "ty", 2, loop(1, "tx", 4, assign("A", (v(0), v(1)), ld("X", v(0), v(1))), barrier("block"),
                                 assign("B", (v(0), v(1)), ld("A", v(0), v(1))),
                                 kind="parallel", binding="block0"), kind="parallel", binding="block1")
    p = program("blk", ("R", "C"), [tensor("A", ("R", "C")), tensor("B", ("R", "C")),
                                     tensor("X", ("R", "C"), written=False)], body)
    ax = tc.plot(p, view="phases", sizes={"R": 2, "C": 4}).axes[0]
    assert [round(r.get_width()) for r in ax.patches] == [8, 8]
    ends = [t.get_text() for t in ax.texts if t.get_text().startswith(("barrier", "end"))]
    assert ends[0] == "barrier(block)" and ends[1].startswith("end of threads loop ty")


def test_refusals_are_plot_errors_with_hints(monkeypatch):
    s = tc.schedule(gemm, M=8, N=8, K=8)
    with pytest.raises(PlotError, match="unknown view"):
        tc.plot(s, view="bars")
    with pytest.raises(PlotError, match="no barrier phases") as err:
        tc.plot(s, view="phases")
    assert "bind" in err.value.hint
    with pytest.raises(PlotError, match="more than"):
        tc.plot(tc.schedule(gemm, M=200, N=200, K=8))
    with pytest.raises(PlotError, match="statements match"):
        tc.plot(s, statement="no such statement")
    real = importlib.import_module

    def without_matplotlib(name, *args):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_matplotlib)
    with pytest.raises(tc.TilecertError, match="needs matplotlib") as err:
        tc.plot(s)
    assert "pip install" in err.value.hint


def test_a_witness_is_not_drawn_on_the_phases():
    bad = next(r for r in swapped.check() if r.status == "disproved")
    with pytest.raises(PlotError, match="witness is drawn on the iteration space"):
        tc.plot(swapped, bad, view="phases")
