"""The checker's public face: tc.check, Schedule.check, reports, errors, the CLI, and unknown verdicts.

Unknown must be reached, and never counted as success: a z3 timeout, a non-affine query z3
cannot decide, an ambiguous reading of tau, a temporary that does not forward its value, a
load under a data-dependent select, an obligation kind the checker does not discharge.
"""
from __future__ import annotations

import textwrap

import pytest

import examples
import tilecert as tc
from tilecert.checker import CheckerError, Target, check_program, check_transform
from tilecert.checker.model import Model
from tilecert.cli import main as cli
from tilecert.semantics import loopir as L
from tilecert.semantics.ir import walk
from tilecert.semantics.index import IBin, ISize
from tilecert.semantics.mapper import subst_node
from tilecert.semantics.transform import Obligation, Piece, Tau, Forward

from test_checker_catalogue import block_kernel, owner_nest, stencil
from test_checker_programs import (accum, add, assign, decl, ld, lit, loop, mul, plus, program, retyped, tensor,
                                   transform, v)


def copy_loop(kind="parallel"):
    return program("copy", ("N",), [tensor("A", ("N",)), tensor("X", ("N",), written=False)],
                   loop(0, "i", "N", assign("A", (v(0),), ld("X", v(0))), kind=kind))


# ----------------------------------------------------------------------------- entry points
def test_check_accepts_kernels_programs_and_schedules():
    kernel = examples.EXAMPLES["transpose"].kernel
    assert tc.check(kernel).ok
    assert tc.check(tc.capture(kernel)).ok  # a tile program: expanded first
    s = tc.schedule(kernel, M=8, N=6)
    s.split("nest.0", 2)
    report = tc.check(s)
    assert report.ok and report.results == s.check().results
    assert {r.subject for r in report} == {"initial program transpose", "op 0: split(loop='nest.0', factor=2)"}


def test_report_explains_formula_verdict_and_witness():
    p = copy_loop()
    new = program("copy", ("N",), p.tensors, loop(0, "i", "N", assign("A", (0,), ld("X", v(0))), kind="parallel"))
    r = check_transform(p, new, Tau(), {"N": 4})
    text = r.explain()
    assert "coverage: DISPROVED [isl]" in text and "formula: for every effectful statement" in text
    assert "instance: new `A[0] = X[i]` at (i=1)" in text
    assert "noninterference: DISPROVED" in text and "cell: A[0]" in text
    assert "replay: CONFIRMED" in text
    assert text.splitlines()[-1].endswith("NOT OK") and not r.ok


def test_bad_input_raises_typed_errors_with_hints():
    with pytest.raises(CheckerError, match="cannot check a str") as err:
        tc.check("gemm")
    assert err.value.hint
    with pytest.raises(CheckerError, match="unknown size"):
        check_program(copy_loop(), {"Q": 3})
    with pytest.raises(CheckerError, match="must be an int >= 0"):
        check_program(copy_loop(), {"N": -1})
    bad = program("bad", ("N",), [tensor("A", ("N",))], loop(0, "i", v(7), assign("A", (v(0),), lit(1))))
    with pytest.raises(CheckerError, match="no enclosing loop binds"):
        check_program(bad)
    with pytest.raises(CheckerError, match="not in loop form"):
        Model(tc.capture(examples.EXAMPLES["gemm"].kernel))


def test_empty_report_is_not_ok():
    assert not tc.checker.Report().ok


def test_cli_check_exits_zero_only_when_all_is_proved(tmp_path, capsys):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent('''
        import tilecert as tc
        from tilecert import i32

        @tc.kernel
        def double(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], bn: int = 8):
            N = A.shape[0]
            for blk in tc.parallel(tc.cdiv(N, bn)):
                B.tile((blk.index() * bn,), (bn,)).store(A.tile((blk.index() * bn,), (bn,)).load() * 2)

        s = tc.schedule(double, N=64)
        s.bind("blk", "grid0")
    '''))
    assert cli(["check", str(good)]) == 0
    assert "OK" in capsys.readouterr().out
    bad = tmp_path / "bad.py"
    two_blocks = 's.bind("blk", "block0")\ns.bind("load.load.N", "block0")'  # one block slot used twice in a nest
    bad.write_text(good.read_text().replace('s.bind("blk", "grid0")', two_blocks))
    assert cli(["check", str(bad)]) == 1
    assert "containment: DISPROVED" in capsys.readouterr().out
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert cli(["check", str(empty)]) == 2


# ----------------------------------------------------------------------------- unknown is reached, and is not success
def test_z3_timeout_is_unknown():
    # fusing loops with symbolic extents divides by a size: not Presburger, and too hard for z3 in 1 ms
    p = program("fz", ("N", "M"), [tensor("A", ("N", "M"))],
                loop(0, "i", "N", loop(1, "j", "M", assign("A", (v(0), v(1)), lit(1)))))
    t = transform(p, "fuse", "i", "j")
    r = check_transform(p, t.program, t.tau, timeout_ms=1, datamaps=t.datamaps)
    assert r.status("coverage") == "unknown" and "z3" in r.verdicts("coverage")[0].reason
    assert not r.ok


def test_z3_decides_products_of_sizes():
    # a loop over N * N cells of a tensor of N * N elements: in bounds, but only z3 can say so
    p = program("sq", ("N",), [tensor("A", (mul("N", "N"),))],
                loop(0, "i", IBin("mul", ISize("N"), ISize("N")), assign("A", (v(0),), lit(1)), kind="parallel"))
    r = check_program(p)
    assert r.status("bounds") == "proved" and r.verdicts("bounds")[0].engine == "z3"
    over = program("sq", ("N",), [tensor("A", (mul("N", "N"),))],
                   loop(0, "i", IBin("mul", ISize("N"), ISize("N")), assign("A", (add(v(0), 1),), lit(1)), kind="parallel"))
    w = check_program(over).verdicts("bounds")[0].witness
    assert w is not None and "outside its shape" in w.summary


def test_threads_per_block_over_the_limit_are_found_by_z3():
    # each thread loop fits a block dimension (<= 1000 iterations), their product does not
    capped = [IBin("min", ISize(n), L.IConst(1000)) for n in ("N", "M")]
    p = program("blk", ("N", "M"), [tensor("A", ("N", "M"))],
                loop(0, "t", capped[0], loop(1, "u", capped[1], assign("A", (v(0), v(1)), lit(1)), kind="parallel",
                                             binding="block1"), kind="parallel", binding="block0"))
    verdict = check_program(p).verdicts("hardware_limits")[0]
    assert verdict.status == "disproved" and verdict.engine == "z3"
    assert "threads per block" in verdict.witness.summary


def test_ambiguous_correspondence_turns_a_failure_into_unknown():
    # two identical statements: which new copy stands for which old one is a choice, so a failure is not a disproof
    body = assign("A", (0,), plus(ld("A", 0), ld("X", v(0))))
    p = program("dup", ("N",), [tensor("A", ("N",)), tensor("X", ("N",), written=False)], loop(0, "i", "N", body, body))
    rev = IBin("sub", IBin("sub", ISize("N"), L.IConst(1)), v(0))
    new = retyped(p, "i", body=subst_node(p.body.ops[0].body, 0, rev))
    r = check_transform(p, new, Tau((Piece(((0, rev),)),)), {"N": 3})
    assert r.status("dependence") == "unknown" and "ambiguous" in r.verdicts("dependence")[0].reason
    assert r.verdicts("dependence")[0].witness is not None  # the failing reading is still shown


def test_temporaries_introduced_by_a_transform_are_compared_through_their_values():
    # unrolling copies the same load into each copy; common-load sharing reads it once into a temporary
    tensors = [tensor("A", (2,)), tensor("X", ("N",), written=False), tensor("Y", (2,), written=False)]
    p = program("cse", ("N",), tensors, loop(0, "j", 2, accum("A", (v(0),), plus(ld("X", 0), ld("Y", v(0))))))
    t = transform(p, "unroll", "j", True)
    assert "X_cse" in {st.buf.name for st in walk(t.program.body) if isinstance(st, L.Decl)}
    assert check_transform(p, t.program, t.tau, {"N": 3}, datamaps=t.datamaps).ok


def test_a_stale_temporary_is_unknown():
    # old: for j in [0, 2): { A[j] += X[0]; X[0] = 7 }; new: t = X[0] once, before both copies
    tensors = [tensor("A", (2,)), tensor("X", (1,))]
    p = program("stale", (), tensors, loop(0, "j", 2, accum("A", (v(0),), ld("X", 0)), assign("X", (0,), lit(7))))
    new = program("stale", (), tensors, decl("t", ()), assign("t", (), ld("X", 0)),
                  accum("A", (0,), ld("t")), assign("X", (0,), lit(7)),
                  accum("A", (1,), ld("t")), assign("X", (0,), lit(7)))
    tau = Tau((Piece(((0, L.IConst(0)),)), Piece(((0, L.IConst(1)),))))
    r = check_transform(p, new, tau, datamaps=(Forward("t", ld("X", 0)),))
    reason = r.verdicts("coverage")[0].reason
    assert r.status("coverage") == "unknown" and "X, read into t, is written" in reason
    assert r.status("datamap") == "disproved"  # the declaration itself, with the instances
    r = check_transform(p, new, tau, datamaps=(Forward("t", ld("X", 1)),))  # a declaration that does not hold
    assert "t is stored X[0], not the declared X[1]" in r.verdicts("coverage")[0].reason


def test_a_conflict_through_a_data_dependent_select_is_unknown():
    # A[i] = C[i] ? B[0] : 0 with B[0] written by instance 0: a race only where the data selects that branch
    value = L.Sel(ld("C", v(0)), ld("B", 0), lit(0), "i32")
    p = program("sel", ("N",), [tensor("A", ("N",)), tensor("B", ("N",)), tensor("C", ("N",), written=False)],
                loop(0, "i", "N", assign("A", (v(0),), value), assign("B", (v(0),), lit(1)), kind="parallel"))
    r = check_program(p, {"N": 3})
    assert r.status("noninterference") == "unknown" and "data-dependent" in r.verdicts("noninterference")[0].reason


def test_obligations_an_op_lists_but_the_checker_does_not_discharge_are_unknown():
    p = copy_loop()
    listed = (Obligation("pipeline_schedule", "pipeline", "issue times respect every dependence"),)
    r = check_transform(p, p, Tau(), listed=listed)
    assert r.status("pipeline_schedule") == "unknown" and not r.ok
    assert r.status("coverage") == "proved"


# ----------------------------------------------------------------------------- each obligation: proved and disproved
def test_every_obligation_kind_is_reached_proved_and_disproved():
    seen: dict[str, set[str]] = {}

    def note(report):
        for res in report:
            seen.setdefault(res.kind, set()).add(res.status)

    note(tc.check(examples.EXAMPLES["gemm"].kernel))
    p = copy_loop()
    note(check_transform(p, program("c", ("N",), p.tensors, loop(0, "i", "N", assign("A", (0,), ld("X", v(0))),
                                                                  kind="parallel")), Tau(), {"N": 4}))
    red = program("r", ("N",), [tensor("A", ("N",))],
                  loop(0, "i", "N", accum("A", (0,), ld("A", v(0))), kind="reduce"))
    note(check_program(red))
    big = program("big", (), [tensor("A", (64,))],
                  loop(0, "g", 2, decl("sh", (16384,), "shared"),
                       loop(1, "t", 32, assign("A", (add(mul(v(0), 32), v(1)),), lit(1)), kind="parallel",
                            binding="grid0"), kind="parallel", binding="block0"))
    note(check_program(big))  # block around grid: containment disproved
    shared = program("shared", (), [tensor("A", (64,))],
                     loop(0, "g", 2, decl("sh", (16384,), "shared"),
                          loop(1, "t", 32, assign("A", (add(mul(v(0), 32), v(1)),), lit(1)), kind="parallel",
                               binding="block0"), kind="parallel", binding="grid0"))
    assert "65536 bytes of shared memory (sh) > 49152" in check_program(shared).explain()
    note(check_program(shared))
    note(check_program(block_kernel(True)))
    q = stencil(1)
    t = transform(q, "swap", "i", "j")
    note(check_transform(q, t.program, t.tau, datamaps=t.datamaps))
    new, tau = owner_nest(True)
    note(check_transform(owner_nest(False), new, tau))
    note(check_program(program("oob", ("N",), [tensor("A", ("N",))], loop(0, "i", "N", assign("A", (add(v(0), 1),),
                                                                                              lit(1))))))
    for kind in ("coverage", "prefix_cut", "dependence", "noninterference", "reduction_policy", "barrier_uniform",
                 "bounds", "containment", "hardware_limits"):
        assert {"proved", "disproved"} <= seen[kind], (kind, seen.get(kind))


def test_shared_memory_limit_follows_the_target():
    p = program("smem", ("G",), [tensor("A", ("G",))],
                loop(0, "g", "G", decl("sh", (16384,), "shared"),
                     loop(1, "t", 32, assign("sh", (v(1),), lit(1)), kind="parallel", binding="block0"),
                     assign("A", (v(0),), ld("sh", 0)), kind="parallel", binding="grid0"))
    verdict = check_program(p, {"G": 2}).verdicts("hardware_limits")[0]
    assert verdict.status == "disproved" and "65536 bytes of shared memory (sh)" in verdict.witness.summary
    assert check_program(p, {"G": 2}, target=Target(max_shared_bytes=96 * 1024)).ok
