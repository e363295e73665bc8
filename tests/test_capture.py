"""Capture-time diagnostics: every misuse of the DSL is a TilecertError at the user's line.

Each kernel below triggers exactly one diagnostic. The offending DSL line carries a
marker comment ``# @E:<name>``; ``expect`` checks the exception type, that ``err.loc``
names this file and the marked line, and that the error carries a hint.
"""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tilecert as tc
from tilecert import f32, f64, i32

# ---------------------------------------------------------------------------- helpers

THIS_FILE = os.path.abspath(__file__)


def _markers() -> dict[str, int]:
    found: dict[str, int] = {}
    with open(THIS_FILE, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, start=1):
            for name in re.findall(r"#\s*@E:([\w-]+)\s*$", text):
                assert name not in found, f"marker {name} appears twice"
                found[name] = lineno
    return found


MARK = _markers()


def expect(exc_type: type, marker: str, fn, *args, match: str | None = None, **kwargs) -> tc.TilecertError:
    """Call ``fn`` and check the diagnostic: exact type, location (file and line) and hint."""
    with pytest.raises(tc.TilecertError) as info:
        fn(*args, **kwargs)
    err = info.value
    assert type(err) is exc_type, f"expected {exc_type.__name__}, got {type(err).__name__}: {err}"
    assert os.path.abspath(err.loc.file) == THIS_FILE, f"wrong file in {err.loc}: {err}"
    assert err.loc.line == MARK[marker], f"expected line {MARK[marker]} ({marker}), got {err.loc.line}: {err}"
    assert isinstance(err.hint, str) and err.hint.strip(), f"no hint: {err}"
    if match is not None:
        assert re.search(match, err.message), f"message {err.message!r} does not match {match!r}"
    # the rendered error names the location and the hint
    assert str(err).startswith(f"{err.loc.file}:{err.loc.line}:")
    assert "hint:" in str(err)
    return err


def cap(kernel, **config):
    return lambda: tc.capture(kernel, **config)


def test_markers_are_found():
    # every marker names a line that is really a DSL statement of this file
    assert len(MARK) >= 40
    with open(THIS_FILE, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for name, line in MARK.items():
        assert f"@E:{name}" in lines[line - 1]


# ---------------------------------------------------------------------------- parallel mutation

@tc.kernel
def k_parallel_mutation(X: tc.Tensor[f32, "N"]):
    acc = tc.zeros(f32, (4,))
    for nest in tc.parallel(2):
        y = acc * 2.0
        acc = y + 1.0  # @E:parallel_mutation
    X.tile((0,), (4,)).store(acc)


@tc.kernel
def k_nested_parallel_mutation(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(2):
        acc = tc.zeros(f32, (4,))
        for lane in nest.parallel(4):
            acc = tc.zeros(f32, (4,))  # @E:nested_parallel_mutation
        X.tile((nest.index() * 4,), (4,)).store(acc)


def test_parallel_cannot_mutate_outer_tile():
    expect(tc.CaptureError, "parallel_mutation", cap(k_parallel_mutation), match=r"parallel.*`acc`")
    expect(tc.CaptureError, "nested_parallel_mutation", cap(k_nested_parallel_mutation), match="`acc`")


# ---------------------------------------------------------------------------- typing of tile ops

@tc.kernel
def k_broadcast():
    for nest in tc.parallel(1):
        a = tc.zeros(f32, (3, 4))
        b = tc.zeros(f32, (3, 5))
        c = a + b  # @E:broadcast


@tc.kernel
def k_dtype_mismatch():
    for nest in tc.parallel(1):
        a = tc.zeros(f32, (4,))
        b = tc.zeros(i32, (4,))
        c = a * b  # @E:dtype_mismatch


@tc.kernel
def k_int_truediv():
    for nest in tc.parallel(1):
        a = tc.full(i32, (4,), 7)
        b = tc.full(i32, (4,), 2)
        c = a / b  # @E:int_truediv


@tc.kernel
def k_exp_int():
    for nest in tc.parallel(1):
        a = tc.iota(i32, (4,))
        c = tc.exp(a)  # @E:exp_int


@tc.kernel
def k_index_truediv():
    for nest in tc.parallel(4):
        half = nest.index() / 2  # @E:index_truediv


@tc.kernel
def k_exp_number():
    for nest in tc.parallel(1):
        c = tc.exp(3.0)  # @E:exp_number


def test_broadcast_mismatch():
    expect(tc.TypeMismatch, "broadcast", cap(k_broadcast), match="broadcast")


def test_dtype_mismatch():
    expect(tc.TypeMismatch, "dtype_mismatch", cap(k_dtype_mismatch), match="f32 and i32")


def test_truediv_on_ints():
    expect(tc.TypeMismatch, "int_truediv", cap(k_int_truediv), match="integer")


def test_exp_of_int_tile():
    expect(tc.TypeMismatch, "exp_int", cap(k_exp_int), match="exp.*float")


def test_exp_of_a_python_number():
    expect(tc.TypeMismatch, "exp_number", cap(k_exp_number), match="takes a tile")


def test_truediv_on_index():
    expect(tc.CaptureError, "index_truediv", cap(k_index_truediv), match="integer division")


# ---------------------------------------------------------------------------- stages

@tc.kernel
def k_stage_on_serial():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            s.stage("load")  # @E:stage_on_serial


@tc.kernel
def k_stage_from_nested_serial():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            k.stage("load")
            x = tc.zeros(f32, (2,))
            for s in k.serial(2):
                k.stage("compute")  # @E:stage_nested


@tc.kernel
def k_stage_after_loop():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            k.stage("load")
        k.stage("late")  # @E:stage_after_loop


@tc.kernel
def k_op_before_stage():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            x = tc.zeros(f32, (2,))
            k.stage("load")  # @E:op_before_stage


@tc.kernel
def k_index_math_before_stage(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            off = k.index() * 2 + 1  # pure index math may precede the first stage cut
            k.stage("load")
            x = X.tile((off,), (2,)).load()
            k.stage("store")
            X.tile((off + 8,), (2,)).store(x)


@tc.kernel
def k_duplicate_stage():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            k.stage("load")
            x = tc.zeros(f32, (2,))
            k.stage("load")  # @E:duplicate_stage


@tc.kernel
def k_duplicate_default_stage():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            k.stage("stage1")
            k.stage()  # @E:duplicate_default_stage


@tc.kernel
def k_stage_not_a_string():
    for nest in tc.parallel(1):
        for k in nest.pipeline(3):
            k.stage(1)  # @E:stage_not_a_string


def test_stage_on_serial_handle():
    expect(tc.CaptureError, "stage_on_serial", cap(k_stage_on_serial), match="active pipeline")


def test_stage_from_nested_serial():
    expect(tc.CaptureError, "stage_nested", cap(k_stage_from_nested_serial), match="active pipeline")


def test_stage_after_its_pipeline():
    expect(tc.CaptureError, "stage_after_loop", cap(k_stage_after_loop), match="active pipeline")


def test_op_before_first_stage_cut():
    expect(tc.CaptureError, "op_before_stage", cap(k_op_before_stage), match="precede the first stage")


def test_index_math_before_first_stage_is_fine():
    prog = tc.capture(k_index_math_before_stage)
    stages = [op.name for op in tc.ir.walk(prog.body) if isinstance(op, tc.ir.Stage)]
    assert stages == ["load", "store"]


def test_stage_name_must_be_a_string():
    expect(tc.CaptureError, "stage_not_a_string", cap(k_stage_not_a_string), match="strings")


def test_duplicate_stage_names():
    expect(tc.CaptureError, "duplicate_stage", cap(k_duplicate_stage), match="'load' repeats")
    expect(tc.CaptureError, "duplicate_default_stage", cap(k_duplicate_default_stage), match="'stage1' repeats")


# ---------------------------------------------------------------------------- region attributes

@tc.kernel
def k_interval_zero():
    for nest in tc.parallel(1):
        for k in nest.pipeline(4, interval=0):  # @E:interval_zero
            x = tc.zeros(f32, (2,))


@tc.kernel
def k_negative_window():
    for nest in tc.parallel(1):
        for k in nest.pipeline(4, window=-1):  # @E:negative_window
            x = tc.zeros(f32, (2,))


@tc.kernel
def k_root_pipeline_bad_interval():
    for k in tc.pipeline(4, interval=-3):  # @E:root_pipeline_interval
        x = tc.zeros(f32, (2,))


@tc.kernel
def k_negative_extent():
    for nest in tc.parallel(1):
        for s in nest.serial(-2):  # @E:negative_extent
            x = tc.zeros(f32, (2,))


@tc.kernel
def k_empty_extent():
    for nest in tc.parallel():  # @E:empty_extent
        x = tc.zeros(f32, (2,))


@tc.kernel
def k_bad_region_policy():
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (2,))
        for r in nest.reduce(4, policy="sideways"):  # @E:bad_region_policy
            acc = acc + 1.0


@tc.kernel
def k_bad_expr_policy():
    for nest in tc.parallel(1):
        x = tc.zeros(f32, (4, 4))
        y = tc.reduce(x, 0, policy="sideways")  # @E:bad_expr_policy


@tc.kernel
def k_unknown_binding():
    for nest in tc.parallel(2, bind="grid"):  # @E:unknown_binding
        x = tc.zeros(f32, (2,))


@tc.kernel
def k_containment():
    for w in tc.parallel(2, bind="warp"):
        for b in w.parallel(2, bind="block"):  # @E:containment
            x = tc.zeros(f32, (2,))


@tc.kernel
def k_containment_through_serial():
    for t in tc.parallel(2, bind="thread"):
        for s in t.serial(2):
            for p in s.parallel(2):
                for w in p.parallel(2, bind="warp"):  # @E:containment_deep
                    x = tc.zeros(f32, (2,))


@tc.kernel
def k_containment_ok():
    for blk in tc.parallel(2, bind="block"):
        for w in blk.parallel(2, bind="warp"):
            for t in w.parallel(2, bind="thread"):
                for v in t.parallel(2, bind="vector"):
                    x = tc.zeros(f32, (2,))


def test_pipeline_interval_and_window():
    expect(tc.CaptureError, "interval_zero", cap(k_interval_zero), match="interval")
    expect(tc.CaptureError, "negative_window", cap(k_negative_window), match="window")
    expect(tc.CaptureError, "root_pipeline_interval", cap(k_root_pipeline_bad_interval), match="interval")


def test_region_extents():
    expect(tc.CaptureError, "negative_extent", cap(k_negative_extent), match="negative")
    expect(tc.CaptureError, "empty_extent", cap(k_empty_extent), match="non-empty")


def test_unknown_reduction_policy():
    expect(tc.CaptureError, "bad_region_policy", cap(k_bad_region_policy), match="policy 'sideways'")
    expect(tc.CaptureError, "bad_expr_policy", cap(k_bad_expr_policy), match="policy 'sideways'")


def test_unknown_binding():
    expect(tc.CaptureError, "unknown_binding", cap(k_unknown_binding), match="binding 'grid'")


def test_containment_violation():
    expect(tc.CaptureError, "containment", cap(k_containment), match="'warp' does not contain 'block'")
    expect(tc.CaptureError, "containment_deep", cap(k_containment_through_serial),
           match="'thread' does not contain 'warp'")
    bindings = [op.binding for op in tc.ir.walk(tc.capture(k_containment_ok).body)
                if isinstance(op, tc.ir.Parallel)]
    assert bindings == ["block", "warp", "thread", "vector"]


# ---------------------------------------------------------------------------- mma roles

@tc.kernel
def k_mma_no_contraction():
    for nest in tc.parallel(1):
        a = tc.zeros(f32, (3, 4), dims=("M", "K"))
        b = tc.zeros(f32, (5, 2), dims=("J", "N"))
        c = tc.zeros(f32, (3, 2), dims=("M", "N"))
        d = tc.mma(a, b, c)  # @E:mma_no_contraction


@tc.kernel
def k_mma_named_extents():
    for nest in tc.parallel(1):
        a = tc.zeros(f32, (3, 4), dims=("M", "K"))
        b = tc.zeros(f32, (5, 2), dims=("K", "N"))
        c = tc.zeros(f32, (3, 2), dims=("M", "N"))
        d = tc.mma(a, b, c)  # @E:mma_named_extents


@tc.kernel
def k_mma_positional_extents():
    for nest in tc.parallel(1):
        a = tc.zeros(f32, (3, 4))
        b = tc.zeros(f32, (5, 2))
        c = tc.zeros(f32, (3, 2))
        d = tc.mma(a, b, c)  # @E:mma_positional_extents


def test_mma_without_contracted_dim():
    expect(tc.TypeMismatch, "mma_no_contraction", cap(k_mma_no_contraction), match="contracted")


def test_mma_extents_disagree():
    expect(tc.TypeMismatch, "mma_named_extents", cap(k_mma_named_extents), match="extents disagree for dim K")
    expect(tc.TypeMismatch, "mma_positional_extents", cap(k_mma_positional_extents),
           match="extents disagree for the k dimension")


# ---------------------------------------------------------------------------- memories

@tc.kernel
def k_mem_load_first():
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        x = m.load()  # @E:mem_load_first


@tc.kernel
def k_mem_zero_trip(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        for s in nest.serial(0):
            m.store(tc.zeros(f32, (4,)))
        x = m.load()  # @E:mem_zero_trip
        X.tile((nest.index() * 4,), (4,)).store(x)


@tc.kernel
def k_mem_symbolic_trip(X: tc.Tensor[f32, "N"]):
    N = X.shape[0]
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        for s in nest.serial(N):
            m.store(tc.zeros(f32, (4,)))
        x = m.load()  # @E:mem_symbolic_trip
        X.tile((nest.index() * 4,), (4,)).store(x)


@tc.kernel
def k_mem_nested_zero_trip(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        for s in nest.serial(3):
            for t in s.serial(0):
                m.store(tc.zeros(f32, (4,)))
        x = m.load()  # @E:mem_nested_zero_trip
        X.tile((nest.index() * 4,), (4,)).store(x)


@tc.kernel
def k_mem_definite_store(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        for s in nest.serial(2):
            for t in s.serial(1):
                m.store(tc.full(f32, (4,), 2.5))
        x = m.load()
        X.tile((nest.index() * 4,), (4,)).store(x)


@tc.kernel
def k_mem_ancestor_store():
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        for lane in nest.parallel(2):
            m.store(tc.zeros(f32, (4,)))  # @E:mem_ancestor_store


@tc.kernel
def k_mem_root_ancestor_store():
    m = tc.memory(f32, (4,))
    for nest in tc.parallel(2):
        m.store(tc.zeros(f32, (4,)))  # @E:mem_root_ancestor_store


@tc.kernel
def k_mem_wrong_shape():
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        m.store(tc.zeros(f32, (5,)))  # @E:mem_wrong_shape


@tc.kernel
def k_mem_wrong_dtype():
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,))
        m.store(tc.zeros(i32, (4,)))  # @E:mem_wrong_dtype


@tc.kernel
def k_mem_bad_scope():
    for nest in tc.parallel(2):
        m = tc.memory(f32, (4,), scope="texture")  # @E:mem_bad_scope


def test_memory_load_before_store():
    expect(tc.CaptureError, "mem_load_first", cap(k_mem_load_first), match="definite preceding store")


def test_memory_store_only_in_maybe_empty_loop():
    expect(tc.CaptureError, "mem_zero_trip", cap(k_mem_zero_trip), match="definite preceding store")
    expect(tc.CaptureError, "mem_symbolic_trip", cap(k_mem_symbolic_trip), match="definite preceding store")
    expect(tc.CaptureError, "mem_nested_zero_trip", cap(k_mem_nested_zero_trip), match="definite preceding store")


def test_memory_store_in_nonempty_loops_counts():
    out = tc.run(k_mem_definite_store, X=np.zeros(8, np.float32))["X"]
    np.testing.assert_array_equal(out, np.full(8, 2.5, np.float32))


def test_memory_store_from_child_parallel():
    expect(tc.CaptureError, "mem_ancestor_store", cap(k_mem_ancestor_store), match="ancestor memory")
    expect(tc.CaptureError, "mem_root_ancestor_store", cap(k_mem_root_ancestor_store), match="ancestor memory")


def test_memory_store_of_wrong_type():
    expect(tc.TypeMismatch, "mem_wrong_shape", cap(k_mem_wrong_shape), match="memory's type")
    expect(tc.TypeMismatch, "mem_wrong_dtype", cap(k_mem_wrong_dtype), match="memory's type")
    expect(tc.CaptureError, "mem_bad_scope", cap(k_mem_bad_scope), match="scope 'texture'")


# ---------------------------------------------------------------------------- Python control flow

@tc.kernel
def k_break():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            x = tc.zeros(f32, (2,))
            break  # @E:break


@tc.kernel
def k_continue():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            continue  # @E:continue


@tc.kernel
def k_return():
    for nest in tc.parallel(1):
        x = tc.zeros(f32, (2,))
        return  # @E:return


@tc.kernel
def k_for_else():
    for nest in tc.parallel(1):
        for s in nest.serial(3):  # @E:for_else
            x = tc.zeros(f32, (2,))
        else:
            y = tc.zeros(f32, (2,))


@tc.kernel
def k_break_in_python_loop_is_fine(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (2,))
        for i in range(10):
            if i == 3:
                break
            acc = acc + 1.0
        X.tile((0,), (2,)).store(acc)


@tc.kernel
def k_if_on_tile():
    for nest in tc.parallel(1):
        x = tc.zeros(f32, (4,))
        if x > 0.0:  # @E:if_on_tile
            x = x + 1.0


@tc.kernel
def k_and_on_tile():
    for nest in tc.parallel(1):
        x = tc.zeros(f32, (4,))
        y = (x > 0.0) and (x < 1.0)  # @E:and_on_tile


@tc.kernel
def k_if_on_index():
    for nest in tc.parallel(4):
        if nest.index() < 2:  # @E:if_on_index
            x = tc.zeros(f32, (4,))


@tc.kernel
def k_iterate_tile():
    for nest in tc.parallel(1):
        x = tc.zeros(f32, (4,))
        for v in x:  # @E:iterate_tile
            pass


def test_break_continue_return_in_region():
    expect(tc.CaptureError, "break", cap(k_break), match="`break`")
    expect(tc.CaptureError, "continue", cap(k_continue), match="`continue`")
    expect(tc.CaptureError, "return", cap(k_return), match="`return`")
    expect(tc.CaptureError, "for_else", cap(k_for_else), match="for-else")


def test_break_in_python_loop_keeps_python_meaning():
    out = tc.run(k_break_in_python_loop_is_fine, X=np.zeros(2, np.float32))["X"]
    np.testing.assert_array_equal(out, [3.0, 3.0])


def test_python_branch_on_data():
    expect(tc.CaptureError, "if_on_tile", cap(k_if_on_tile), match="truth value")
    expect(tc.CaptureError, "and_on_tile", cap(k_and_on_tile), match="truth value")
    expect(tc.CaptureError, "if_on_index", cap(k_if_on_index), match="truth value")
    expect(tc.CaptureError, "iterate_tile", cap(k_iterate_tile), match="not iterable")


# ---------------------------------------------------------------------------- scoping

@tc.kernel
def k_value_after_loop():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            t = tc.zeros(f32, (4,))
        u = t + 1.0  # @E:value_after_loop


@tc.kernel
def k_value_after_parallel(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        t = tc.zeros(f32, (4,))
    X.tile((0,), (4,)).store(t)  # @E:value_after_parallel


@tc.kernel
def k_index_after_loop(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            i = s.index() * 2
        x = X.tile((i,), (2,)).load()  # @E:index_after_loop


@tc.kernel
def k_handle_after_loop():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            x = tc.zeros(f32, (2,))
        i = s.index()  # @E:handle_after_loop


@tc.kernel
def k_index_no_axis():
    for nest in tc.parallel(2, 3):
        i = nest.index()  # @E:index_no_axis


@tc.kernel
def k_index_bad_axis():
    for nest in tc.parallel(2, 3):
        i = nest.index(2)  # @E:index_bad_axis


@tc.kernel
def k_index_axis_not_int():
    for nest in tc.parallel(2, 3):
        i = nest.index("0")  # @E:index_axis_not_int


@tc.kernel
def k_inactive_parent():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            for t in nest.serial(2):  # @E:inactive_parent
                x = tc.zeros(f32, (2,))


@tc.kernel
def k_root_region_inside_region():
    for nest in tc.parallel(1):
        for s in tc.serial(2):  # @E:root_region_inside
            x = tc.zeros(f32, (2,))


@tc.kernel
def k_closed_parent():
    for nest in tc.parallel(1):
        for s in nest.serial(3):
            x = tc.zeros(f32, (2,))
        for t in s.serial(2):  # @E:closed_parent
            y = tc.zeros(f32, (2,))


def test_value_defined_in_loop_used_after_it():
    expect(tc.CaptureError, "value_after_loop", cap(k_value_after_loop), match="region that has closed")
    expect(tc.CaptureError, "value_after_parallel", cap(k_value_after_parallel), match="region that has closed")


def test_index_used_outside_its_region():
    expect(tc.CaptureError, "index_after_loop", cap(k_index_after_loop), match="not open")
    expect(tc.CaptureError, "handle_after_loop", cap(k_handle_after_loop), match="outside its range")


def test_index_axis():
    expect(tc.CaptureError, "index_no_axis", cap(k_index_no_axis), match="rank 2")
    expect(tc.CaptureError, "index_bad_axis", cap(k_index_bad_axis), match="axis 2 out of range")
    expect(tc.CaptureError, "index_axis_not_int", cap(k_index_axis_not_int), match="axis '0' out of range")


def test_child_region_from_non_active_parent():
    expect(tc.CaptureError, "inactive_parent", cap(k_inactive_parent), match="active parent")
    expect(tc.CaptureError, "root_region_inside", cap(k_root_region_inside_region), match="active parent")
    expect(tc.CaptureError, "closed_parent", cap(k_closed_parent), match="outside its range")


# ---------------------------------------------------------------------------- carried state

@tc.kernel
def k_carried_number(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        x = X.tile((0,), (4,)).load()
        s = 0.0
        for k in nest.serial(3):
            s = s + x  # @E:carried_number
        X.tile((0,), (4,)).store(s)


@tc.kernel
def k_carried_dtype_change():
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,))
        for k in nest.serial(3):
            acc = tc.cast(acc, f64)  # @E:carried_dtype


@tc.kernel
def k_carried_shape_change():
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,))
        for k in nest.pipeline(3):
            acc = acc + 1.0
            acc = tc.zeros(f32, (5,))  # @E:carried_shape


@tc.kernel
def k_carried_becomes_number():
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,))
        for r in nest.reduce(3):
            acc = 1.5  # @E:carried_number_after


@tc.kernel
def k_carried_nested_change():
    for nest in tc.parallel(1):
        acc = tc.zeros(f32, (4,))
        for i in nest.serial(3):
            for j in i.serial(2):
                acc = acc + tc.zeros(f32, (2, 4))  # @E:carried_nested


def test_carried_variable_starting_as_python_number():
    expect(tc.CaptureError, "carried_number", cap(k_carried_number), match="Python number 0.0")


def test_carried_variable_changing_type():
    expect(tc.CaptureError, "carried_dtype", cap(k_carried_dtype_change), match="changed type")
    expect(tc.CaptureError, "carried_shape", cap(k_carried_shape_change), match="changed type")
    expect(tc.CaptureError, "carried_number_after", cap(k_carried_becomes_number), match="became a float")
    # the inner loop reports first: its own carried `acc` grows a dim
    err = expect(tc.CaptureError, "carried_nested", cap(k_carried_nested_change), match="changed type")
    assert "`acc`" in err.message


# ---------------------------------------------------------------------------- kernels and tensors

@tc.kernel
def k_inner(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        X.tile((0,), (2,)).store(tc.full(f32, (2,), 1.0))


@tc.kernel
def k_nested_run(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        tc.run(k_inner, X=np.zeros(2, np.float32))  # @E:nested_run


@tc.kernel
def k_nested_capture():
    tc.capture(k_inner)  # @E:nested_capture


@tc.kernel
def k_tensor_getitem(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        x = X[0]  # @E:tensor_getitem


@tc.kernel
def k_tensor_setitem(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        X[0:2] = tc.zeros(f32, (2,))  # @E:tensor_setitem


@tc.kernel
def k_store_wrong_dtype(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        X.tile((0,), (2,)).store(tc.zeros(i32, (2,)))  # @E:store_wrong_dtype


@tc.kernel
def k_store_wrong_extent(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        X.tile((0,), (2,)).store(tc.zeros(f32, (3,)))  # @E:store_wrong_extent


@tc.kernel
def k_data_as_index(X: tc.Tensor[f32, "N"]):
    for nest in tc.parallel(1):
        x = X.tile((0,), (1,)).load()
        y = X.tile((x,), (1,)).load()  # @E:data_as_index


def test_nested_kernel_capture():
    expect(tc.CaptureError, "nested_run", lambda: tc.run(k_nested_run, X=np.zeros(2, np.float32)),
           match="cannot be nested")
    expect(tc.CaptureError, "nested_capture", cap(k_nested_capture), match="cannot be nested")
    # also when the inner kernel's program is already cached
    tc.capture(k_inner)
    expect(tc.CaptureError, "nested_run", lambda: tc.run(k_nested_run, X=np.zeros(2, np.float32)),
           match="cannot be nested")
    expect(tc.CaptureError, "nested_capture", cap(k_nested_capture), match="cannot be nested")
    # the failed captures left nothing behind: host code still runs kernels
    out = tc.run(k_inner, X=np.zeros(3, np.float32))["X"]
    np.testing.assert_array_equal(out, [1.0, 1.0, 0.0])


def test_tensor_indexing_with_brackets():
    expect(tc.CaptureError, "tensor_getitem", cap(k_tensor_getitem), match=r"indexed with \[\]")
    expect(tc.CaptureError, "tensor_setitem", cap(k_tensor_setitem), match="not a store")


def test_tensor_store_type_errors():
    expect(tc.TypeMismatch, "store_wrong_dtype", cap(k_store_wrong_dtype), match="i32 tile into the f32")
    expect(tc.TypeMismatch, "store_wrong_extent", cap(k_store_wrong_extent), match="does not match box extent")
    expect(tc.CaptureError, "data_as_index", cap(k_data_as_index), match="int or an index expression")


def test_tile_op_outside_capture():
    with pytest.raises(tc.CaptureError) as info:
        tc.zeros(f32, (2,))
    assert info.value.hint
    assert os.path.abspath(info.value.loc.file) == THIS_FILE


# ---------------------------------------------------------------------------- inputs and config

@tc.kernel  # @E:inputs_kernel
def k_inputs(A: tc.Tensor[f32, "M", "K"], B: tc.Tensor[f32, "K", "N"], C: tc.Tensor[f32, "M", "N"],
             bm: int = 2):
    M, K = A.shape
    N = B.shape[1]
    for nest in tc.parallel(tc.cdiv(M, bm)):
        a = A.tile((nest.index() * bm, 0), (bm, K)).load()
        b = B.tile((0, 0), (K, N)).load()
        C.tile((nest.index() * bm, 0), (bm, N)).store(tc.mma(a, b, tc.zeros(f32, (bm, N), dims=("M", "N"))))


def _arrays(m=4, k=3, n=5, dtype=np.float32):
    rng = np.random.default_rng(0)
    return dict(A=rng.standard_normal((m, k)).astype(dtype), B=rng.standard_normal((k, n)).astype(dtype),
                C=np.zeros((m, n), dtype))


def test_inputs_ok():
    arrs = _arrays()
    out = tc.run(k_inputs, **arrs, bm=3)["C"]
    np.testing.assert_allclose(out, arrs["A"] @ arrs["B"], rtol=1e-5, atol=1e-5)


def test_missing_array():
    arrs = _arrays()
    del arrs["B"]
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs), match="missing array for tensor B")


def test_wrong_dtype():
    arrs = _arrays()
    arrs["A"] = arrs["A"].astype(np.float64)
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs), match="A has dtype float64")


def test_not_an_array():
    arrs = _arrays()
    arrs["A"] = arrs["A"].tolist()
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs), match="numpy array")


def test_inconsistent_sizes():
    arrs = _arrays()
    arrs["B"] = np.zeros((4, 5), np.float32)  # K is 3 from A
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs), match="size K")
    arrs = _arrays()
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs, N=6), match="size N")


def test_wrong_rank():
    arrs = _arrays()
    arrs["C"] = np.zeros(20, np.float32)
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs), match="rank")


def test_unknown_config_parameter():
    expect(tc.CaptureError, "inputs_kernel", lambda: tc.capture(k_inputs, bk=4), match=r"unknown config.*bk")
    arrs = _arrays()
    expect(tc.InputError, "inputs_kernel", lambda: tc.run(k_inputs, **arrs, bk=4),
           match="unknown size or argument 'bk'")


def test_kernel_parameter_without_annotation_or_default():
    with pytest.raises(tc.CaptureError) as info:
        @tc.kernel
        def bad(X, bm: int = 2):
            pass
    err = info.value
    assert "neither a tensor nor a config" in err.message
    assert err.hint and os.path.abspath(err.loc.file) == THIS_FILE
