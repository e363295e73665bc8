"""One naming scheme: buffers and loops are named after the DSL, everywhere they are shown.

The expected names are derived from the kernel source by hand (the variable bound, the op,
the dim), and source lines from the files themselves (``inspect``), never from the output.
"""
from __future__ import annotations

import inspect
import json
import re

import numpy as np
import pytest

import tilecert as tc
from tilecert import f32, i32
from tilecert.semantics import ir, loopir as L
from examples.gemm import gemm
from examples.shift import shift
from test_examples import renamed_gemm


def buffers(p: ir.Program) -> list[str]:
    """The declared buffers of a loop-form program, in program order."""
    return [st.buf.name for st in _stmts(p.body) if isinstance(st, L.Decl)]


def _stmts(block: ir.Block):
    for st in block.ops:
        yield st
        body = getattr(st, "body", None)
        if isinstance(body, ir.Block):
            yield from _stmts(body)


def loop_names(p: ir.Program) -> list[str]:
    return [lp.name for lp in L.loops(p.body)]


def line_of(fn, text: str) -> int:
    """The file line of the first source line of ``fn`` containing ``text``."""
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_gemm_buffers_and_loops_carry_dsl_names():
    p = tc.expand(tc.capture(gemm))
    assert buffers(p) == ["acc", "a", "b"]
    # region loops keep the DSL loop variables; op nests are <buffer written>.<op>.<dim>
    assert loop_names(p) == ["nest.0", "nest.1", "acc.full.p1", "acc.full.p0", "k", "a.load.M", "a.load.K",
                             "b.load.K", "b.load.N", "acc.mma.p1", "acc.mma.p0", "acc.mma.K", "C.store.M",
                             "C.store.N"]


@tc.kernel
def rebound(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"]):
    for i in tc.parallel(tc.cdiv(A.shape[0], 4)):
        x = A.tile((i.index() * 4,), (4,)).load()
        x = x + 1
        B.tile((i.index() * 4,), (4,)).store(x * x + 2)


def test_collisions_are_numbered_and_unbound_values_take_their_op_name():
    p = tc.expand(tc.capture(rebound))
    # the second binding of x is x1; the constants 1 and 2, x * x and (...) + 2 are bound to no
    # variable: named after their ops (full, mul, add), numbered on collision
    assert buffers(p) == ["x", "full", "x1", "mul", "full1", "add"]
    assert "x1.add.N" in loop_names(p) and "add.add.N" in loop_names(p)
    a = np.arange(10, dtype=np.int32)
    assert np.array_equal(tc.run(rebound, A=a, B=np.zeros(10, np.int32))["B"], (a + 1) * (a + 1) + 2)


@tc.kernel
def two_ops(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], C: tc.Tensor[i32, "N"]):
    for i in tc.parallel(1):
        y = A.tile((0,), (4,)).load()
        B.tile((0,), (4,)).store(y + y)


@tc.kernel
def three_ops(A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"], C: tc.Tensor[i32, "N"]):
    for i in tc.parallel(1):
        z = A.tile((0,), (4,)).load()
        C.tile((0,), (4,)).store(z)
        y = A.tile((0,), (4,)).load()
        B.tile((0,), (4,)).store(y + y)


def test_an_op_added_elsewhere_renames_no_loop():
    before = set(loop_names(tc.expand(tc.capture(two_ops))))
    after = set(loop_names(tc.expand(tc.capture(three_ops))))
    assert before <= after  # every loop of the smaller kernel keeps its name
    assert after - before == {"z.load.N", "C.store.N"}


def test_digest_is_invariant_under_dsl_renaming():
    # gemm with every name changed: variables, loop variables, tensors, dims, config, stages
    assert buffers(tc.expand(tc.capture(renamed_gemm))) == ["total", "lhs", "rhs"]
    assert tc.digest(tc.capture(renamed_gemm)) == tc.digest(tc.capture(gemm))
    assert tc.digest(tc.expand(tc.capture(renamed_gemm))) == tc.digest(tc.expand(tc.capture(gemm)))
    # labels survive the JSON round trip and take no part in equality
    p = tc.capture(gemm)
    q = tc.load(tc.dump(p))
    assert q == p and [v.label for op in ir.walk(q.body) for v in ir.results_of(op)] == \
        [v.label for op in ir.walk(p.body) for v in ir.results_of(op)]


def test_printed_ir_names_values_and_regions_after_the_dsl():
    text = tc.format_program(tc.capture(gemm))
    assert "parallel nest [((M + 2) // 3), ((N + 4) // 5)]:" in text
    assert "%a = load A[(nest.0 * 3), (k * 7)] box [3, 7]" in text
    assert re.search(r"%acc\d = mma %a, %b, %acc\d", text)


def test_privatize_takes_the_dsl_name():
    s = tc.schedule(gemm, M=6, N=10, K=14)
    handles = s.privatize("acc", "k")
    assert handles and all(h.startswith("acc.acc") for h in handles)
    assert s.check().ok
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 14)).astype(np.float32)
    b = rng.standard_normal((14, 10)).astype(np.float32)
    out = s.run(A=a, B=b, C=np.zeros((6, 10), np.float32))["C"]
    assert np.allclose(out, a @ b, atol=1e-4)


def test_errors_and_emitted_comments_use_the_same_names():
    s = tc.schedule(gemm, M=6, N=10, K=14)
    with pytest.raises(tc.ScheduleError) as err:
        s.split("mma3.K", 2)
    assert "acc.mma.K" in err.value.hint and "mma3" not in err.value.hint
    source = tc.emit(s)
    assert re.search(r"/\* .*\bacc\b", source) and "t0" not in source


def test_a_schedule_saved_with_old_generated_names_fails_to_load(tmp_path):
    saved = tc.schedule(gemm, M=6, N=10, K=14)
    saved.split("acc.mma.K", 2)
    data = json.loads(saved.to_json())
    data["history"] = [["split", {"loop": "mma3.K", "factor": 2}]]  # the name an older expansion gave this loop
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(tc.SerializationError) as err:
        tc.Schedule.load(path, gemm)
    assert "history entry 0 (split) does not replay" in err.value.message and "mma3.K" in err.value.message
    assert "acc.mma.K" in err.value.hint  # the hint lists the loops by their DSL names
    data["history"] = []  # replays, but not to the program it was saved with: the digest check
    path.write_text(json.dumps(data))
    with pytest.raises(tc.SerializationError, match="does not replay to the program it was saved with"):
        tc.Schedule.load(path, gemm)


def test_show_prints_the_nest_with_statements_evaluated_sizes_and_dsl_lines(capsys):
    s = tc.schedule(gemm, M=10, N=12)
    s.split("acc.mma.K", 4)
    s.show()
    text = capsys.readouterr().out
    assert text == s.loop_tree() + "\n"
    lines = text.splitlines()
    assert lines[0] == "parallel nest.0 [4]" and lines[1] == "  parallel nest.1 [3]"  # cdiv(10, 3), cdiv(12, 5)
    assert any(line.strip() == "pipeline k [((K + 6) // 7)] window=2 interval=1" for line in lines)  # K symbolic
    assert any(line.strip() == "stage 1 compute" for line in lines)
    src = inspect.getsourcefile(gemm.fn)
    mma = next(line for line in lines if " add= " in line)
    assert mma.strip().startswith("acc[acc.mma.p1, acc.mma.p0] add= mul(a[acc.mma.p1, ((4 * acc.mma.K.o)")
    assert mma.endswith(f"{src.rsplit('/', 1)[-1]}:{line_of(gemm.fn, 'acc = tc.mma')}")
    store = next(line for line in lines if line.strip().startswith("C["))
    assert store.endswith(f":{line_of(gemm.fn, 'C.tile((m0, n0)')}")
    assert "< 10)" in text and "< 12)" in text and "M" not in text.replace("C.store.M", "").replace(
        "a.load.M", "")


def test_witness_names_dsl_variables_and_the_schedule_call():
    s = tc.schedule(shift, N=4, M=4)
    s.swap("r", "c"); call_line = inspect.currentframe().f_lineno  # noqa: E702 -- the line of the call
    report = s.check()
    bad = [r for r in report if r.status == "disproved"]
    assert bad and all(r.verdict.witness is not None for r in bad)
    text = "\n".join(r.verdict.witness.lines()[1] for r in bad)
    assert f"introduced by: op 0: swap(outer='r', inner='c') at {__file__}:{call_line}" in text
    witness = report.explain()
    assert "B[r, c]" in witness or "B[" in witness
    assert "(r=" in witness and "c=" in witness  # coordinates by the DSL loop variables
    assert not re.search(r"\bt\d+\b", witness)
