"""Hostile names (solver keywords, generated-looking names, C / CUDA words, comment closers,
unicode, very long ones) through the DSL and through ``tc.load``: every artifact stays correct.

Pure-text properties are checked for every name; compilers (gcc, nvcc) run on a few
representative programs. The reference for emitted text is the same program with plain
names: outside comments, with identifiers reduced to their prefix and number, the source of
a hostile-named program must equal the plain one's.
"""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import types

import islpy as isl
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import test_checker_programs as P
import tilecert as tc
from tilecert import f32
from tilecert.backends.c.build import FLAGS
from tilecert.backends.cuda import cases as gpu_cases
from tilecert.backends.cuda import nvcc_check
from tilecert.backends.cuda.suite import SuiteCase, write_suite
from tilecert.backends.text import c_comment, c_ident
from tilecert.checker.formula import Const, Var, arith, cmp, conj, size_var
from tilecert.checker.obligations.common import sizes_of
from tilecert.checker.solve import Case, search
from tilecert.lowering import lower, validate
from tilecert.semantics.index import IBin, IConst
from tilecert.semantics.sched.partition import partition_breakpoints
from tilecert.semantics.sched.simplify import census, simplify
from tilecert.semantics.solver_names import solver_name, user_name

SOLVER_WORDS = ["mod", "min", "max", "floor", "ceil", "exists", "and", "or", "not", "true", "false", "infty", "NaN",
                "rat", "implies", "floord"]
GENERATED = ["i0_0", "i1_0", "o0", "z", "e0", "p_N", "p_4e_", "S0", "N0", "T0_X", "b1_t0", "tc_kernel", "tc_k0_k",
             "err", "INT64_C"]
C_WORDS = ["int", "for", "restrict", "__global__", "__restrict__", "threadIdx", "main", "NULL", "auto", "template"]
UNICODE = ["Ñ", "変数", "ǅ", "é_x", "ℕ"]
TEXT = ["*/", "/*", '"', "\\", "a\nb", "#define int float", "*/ int x; /*", "??/", "\x00", "\u202e", "x" * 500,
        " ", "../../etc", "a b", "'", "%s%n", "\r\n#include <stdio.h>"]
CORPUS = SOLVER_WORDS + GENERATED + C_WORDS + UNICODE + TEXT
DIMS = [n for n in CORPUS if n.isidentifier()]  # what a Tensor annotation accepts
SAMPLE_DIMS = ["min", "Ñ", "i0_0", "o0", "__global__", "exists"]  # compiled and scheduled in depth

C_KEYWORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
              "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short",
              "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile",
              "while", "template", "class", "new", "delete"}


def template(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], b: int = 4):
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        x = X.tile((p.index() * b,), (b,)).load()
        Y.tile((p.index() * b,), (b,)).store(x * 2.0 + 1.0)


def shifted(X: tc.Tensor[f32, "N"], Y: tc.Tensor[f32, "N"], b: int = 4):
    N = X.shape[0]
    for p in tc.parallel(tc.cdiv(N, b)):
        x = X.tile((p.index() * b + 1,), (b,), bounds="assume").load()
        Y.tile((p.index() * b,), (b,)).store(x)


def renamed(fn, name: str, dim: str) -> tc.Kernel:
    """``fn`` as a kernel named ``name`` whose tensors have the dim ``dim``."""
    new = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__)
    new.__annotations__ = {"X": tc.Tensor[f32, dim], "Y": tc.Tensor[f32, dim], "b": int}
    return tc.kernel(new)


PLAIN = tc.kernel(template)


def inputs(n: int, x: str = "X", y: str = "Y") -> dict[str, np.ndarray]:
    return {x: np.arange(n, dtype=np.float32) - 3, y: np.zeros(n, np.float32)}


# ----------------------------------------------------------------------------- generated text
COMMENT = re.compile(r"/\*.*?\*/", re.S)
IDENT = re.compile(r"(?<![A-Za-z0-9])(T|S|b|tc_k)(\d+)_\w*")


def code_shape(src: str) -> tuple[str, int]:
    """The source outside comments with generated identifiers reduced to prefix + number, and
    the comment count (a name can change neither)."""
    code = COMMENT.sub(" ", src)
    assert "/*" not in code and "*/" not in code
    return IDENT.sub(r"\1\2", code), len(COMMENT.findall(src))


def assert_names_stay_in_comments(src: str, plain_src: str) -> None:
    assert src.isascii() and "\r" not in src
    shape, plain_shape = code_shape(src), code_shape(plain_src)
    assert shape == plain_shape
    for c in COMMENT.findall(src):
        assert "\n" not in c and c.count("/*") == 1 and c.count("*/") == 1


def test_every_comment_is_one_closed_ascii_line_for_every_name():
    comments = [c_comment(f"kernel {n} of {n}") for n in CORPUS]
    for c in comments:
        assert c.isascii() and c.startswith("/* ") and c.endswith(" */") and "\n" not in c
        assert c.count("*/") == 1 and c.count("/*") == 1
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed")
    # an independent reader: the C preprocessor removes the comments and nothing else
    text = "".join(f"{c}int v{k};\n" for k, c in enumerate(comments))
    res = subprocess.run([gcc, "-std=c99", "-E", "-P", "-x", "c", "-"], input=text, capture_output=True, text=True,
                         check=True)
    assert res.stdout.split() == [w for k in range(len(comments)) for w in ("int", f"v{k};")]


@given(st.text(max_size=60))
def test_comment_text_breaks_every_closer(text):
    c = c_comment(text)
    assert c.isascii() and "\n" not in c and c[2:-2].count("*/") == 0 and c[2:-2].count("/*") == 0


def test_identifiers_are_plain_unique_and_no_keyword():
    seen = set()
    for prefix in ("T", "S", "b", "tc_k"):
        for k, n in enumerate(CORPUS):
            ident = c_ident(prefix, n, k)
            assert re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", ident) and "__" not in ident and not ident.endswith("_")
            assert ident not in C_KEYWORDS and len(ident) <= len(prefix) + 4 + 24
            seen.add(ident)
    assert len(seen) == 4 * len(CORPUS)
    with pytest.raises(ValueError):
        c_ident("T1", "x", 2)  # a prefix ending in a digit would make T1 + 2 meet T + 12


# ----------------------------------------------------------------------------- solver names
def test_solver_names_are_reserved_injective_and_read_back():
    names = {solver_name(n) for n in CORPUS}
    assert len(names) == len(CORPUS)
    for n in CORPUS:
        s = solver_name(n)
        assert re.fullmatch(r"p_[A-Za-z0-9_]*", s) and user_name(s) == n
        # isl reads it as a parameter next to the generated variable names, whatever the name
        got = isl.Set(f"[{s}] -> {{ [i0_0, o0] : 0 <= i0_0 < {s} and o0 = {s} }}")
        assert got.get_space().get_var_names(isl.dim_type.param) == [s]
    for generated in ("i0_0", "o0", "z", "e0", "S0", "a3", "z0_1"):
        assert user_name(generated) is None


@given(st.text(max_size=30), st.text(max_size=30))
def test_solver_names_are_injective(a, b):
    assert (solver_name(a) == solver_name(b)) == (a == b)
    assert user_name(solver_name(a)) == a


@pytest.mark.parametrize("a, b", [("exists", "Ñ"), ("i0_0", "p_N"), ("*/", "a\nb"), ("NaN", "z")])
def test_isl_and_z3_points_name_the_users_sizes(a, b):
    x, y = Var(size_var(a)), Var(size_var(b))
    bounds = conj(cmp("lt", Const(1), x), cmp("lt", x, y))
    affine = search([Case("lin", conj(bounds, cmp("eq", arith("add", x, y), Const(7)),
                                      cmp("eq", arith("sub", y, x), Const(3))))])  # one point: (2, 5)
    product = search([Case("mul", conj(bounds, cmp("eq", arith("mul", x, y), Const(15))))])
    assert (affine.status, affine.engine, product.status, product.engine) == ("point", "isl", "point", "z3")
    assert dict(sizes_of(affine.point)) == {a: 2, b: 5} and dict(sizes_of(product.point)) == {a: 3, b: 5}


@pytest.mark.parametrize("size", ["min", "p_0", "floor"])
def test_lowering_witnesses_name_the_users_sizes(size):
    p = P.program("k", (size,), [P.tensor("X", (size,), written=False), P.tensor("Y", (size,))],
                  P.loop(0, "i", size, P.assign("Y", (P.v(0),), P.ld("X", P.v(0))), kind="parallel"))
    lp = lower(p)
    longer = dataclasses.replace(lp, body=(dataclasses.replace(lp.body[0], hi=IBin("add", lp.body[0].hi, IConst(1))),))
    w = validate(p, longer).verdicts("coverage")[0].witness
    assert w.sizes == ((size, 0),) and dict(w.instances[0].coords) == {"i": 0}  # size 0: i = 0 runs anyway


# ----------------------------------------------------------------------------- through the DSL
@pytest.mark.parametrize("dim", DIMS)
def test_dsl_dim_names_check_schedule_and_emit(dim):
    name = CORPUS[(DIMS.index(dim) * 7) % len(CORPUS)]
    k = renamed(template, name, dim)
    assert tc.check(k).ok
    s = tc.schedule(k, **{dim: 10}, b=4)
    plain = tc.schedule(PLAIN, N=10, b=4)
    assert s.partition_breakpoints(f"x.load.{dim}") == plain.partition_breakpoints("x.load.N")
    assert census(s.program) == census(plain.program)
    assert_names_stay_in_comments(tc.emit(s), tc.emit(plain))
    assert_names_stay_in_comments(tc.emit(s, target="cuda"), tc.emit(plain, target="cuda"))


@pytest.mark.parametrize("dim", SAMPLE_DIMS)
def test_dsl_dim_names_schedule_ops_prove_and_compiled_code_matches(dim, tmp_path):
    k = renamed(template, "*/ int evil; /*", dim)
    s = tc.schedule(k, b=4)
    s.split("p", 2)
    assert s.check().ok
    out = tc.compile(s)(**inputs(13))
    assert np.array_equal(out["Y"], tc.run(PLAIN, **inputs(13))["Y"])
    src = tc.emit(s)
    assert src.count("void tc_kernel(") == 1 and "evil;" not in COMMENT.sub(" ", src)
    (tmp_path / "k.c").write_text(src)
    obj, c_file = str(tmp_path / "k.o"), str(tmp_path / "k.c")
    subprocess.run(["gcc", *FLAGS, "-Wall", "-Werror=comment", "-c", "-o", obj, c_file], check=True, capture_output=True)


@pytest.mark.parametrize("dim", ["min", "Ñ", "o0"])
def test_disproved_witnesses_show_the_users_size_names(dim):
    k = renamed(shifted, "k", dim)
    report = tc.check(k)
    bounds = report.verdicts("bounds")
    assert bounds and bounds[0].status == "disproved"
    sizes = dict(bounds[0].witness.sizes)
    assert set(sizes) == {dim}
    text = str(report)
    assert f"{dim}=" in text and solver_name(dim) not in text


# ----------------------------------------------------------------------------- through tc.load
ROLES = ("kernel", "X", "Y", "N", "p", "x", "full", "full1")  # full, full1: the buffers of 2.0, 1.0
_KEEP = {"_", "file", "op", "dtype", "kind", "scope", "mode", "binding", "order"}


def hostile_program(start: int) -> tuple[tc.Program, dict[str, str]]:
    """The plain program, dumped, with each role renamed by distinct corpus names from ``start``."""
    names = [n for n in CORPUS if n][start:] + [n for n in CORPUS if n][:start]
    new = dict(zip(ROLES, names))
    mapping = {old: new[old] for old in ROLES[1:]}

    def rename(node, key=""):
        if isinstance(node, dict):
            return {k: rename(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [rename(v, key) for v in node]
        if isinstance(node, str) and key not in _KEEP:
            if key == "name" and "." in node:  # a loop named after its buffer, op and dim: x.load.N
                return ".".join(mapping.get(part, part) for part in node.split("."))
            return mapping.get(node, node)
        return node

    tree = rename(json.loads(tc.dump(tc.expand(tc.capture(PLAIN)))))
    tree["name"] = new["kernel"]
    return tc.load(json.dumps(tree)), new


PLAIN_LOOPS = tc.expand(tc.capture(PLAIN))
STARTS = range(0, len(CORPUS), 3)  # every corpus name takes several roles over these programs


@pytest.mark.parametrize("start", STARTS)
def test_loaded_programs_with_hostile_names_check_simplify_partition_and_emit(start):
    p, new = hostile_program(start)
    assert tc.check(p).ok
    bound = {new["N"]: 10}
    assert census(simplify(p, bound)) == census(simplify(PLAIN_LOOPS, {"N": 10}))
    assert partition_breakpoints(p, f"{new['x']}.load.{new['N']}", bound_sizes=bound) == \
        partition_breakpoints(PLAIN_LOOPS, "x.load.N", bound_sizes={"N": 10})
    assert_names_stay_in_comments(tc.emit(p), tc.emit(PLAIN_LOOPS))
    assert_names_stay_in_comments(tc.emit(p, target="cuda"), tc.emit(PLAIN_LOOPS, target="cuda"))


@pytest.mark.parametrize("start", [STARTS[len(STARTS) // 2], STARTS[-1]])
def test_loaded_programs_with_hostile_names_compile_and_match_the_interpreter(start):
    p, new = hostile_program(start)
    args = inputs(11, new["X"], new["Y"])
    want = tc.run(p, **args)[new["Y"]]
    assert np.array_equal(want, tc.run(PLAIN, **inputs(11))["Y"])
    for target in ("c", "cuda-host"):
        assert np.array_equal(tc.compile(p, target=target)(**args)[new["Y"]], want), target


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed: emitted CUDA cannot be compiled here")
def test_nvcc_compiles_a_hostile_named_program_to_one_kernel():
    k = renamed(template, "*/ __global__ void x() { /*", "__global__")
    src = tc.emit(gpu_cases.gpu_schedule(k, **{"__global__": 64}), target="cuda")  # sizes bound: proved
    ptx = nvcc_check(src)
    kernels = re.findall(r'extern "C" __global__ void (\w+)\(', src)
    assert len(kernels) == len(re.findall(r"__global__ void", COMMENT.sub(" ", src))) >= 1
    for kernel in kernels:
        assert re.search(rf"\.entry {kernel}\(", ptx)


def test_gpu_suite_files_of_hostile_cases_have_plain_paths(tmp_path):
    p, new = hostile_program(STARTS[-1])
    k = renamed(template, "../../x */", "min")
    suite = [SuiteCase("../../escape", gpu_cases.gpu_schedule(k).program),
             SuiteCase("a\nPASS b", p, sizes={new["N"]: 9})]
    names = write_suite(tmp_path / "s", suite, seed=3)
    assert names == ["case-0", "case-1"]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s"]
    files = sorted(str(f.relative_to(tmp_path / "s")) for f in (tmp_path / "s").rglob("*") if f.is_file())
    assert all(re.fullmatch(r"[A-Za-z0-9_./-]+", f) for f in files), files
    spec = json.loads((tmp_path / "s" / "case-1" / "case.json").read_text())
    assert spec["kernel"] == new["kernel"] and [t["name"] for t in spec["tensors"]] == [new["X"], new["Y"]]
    assert spec["size_names"] == [new["N"]]
    assert np.load(tmp_path / "s" / "case-1" / "inputs" / "t0.npy").shape == (9,)
    plain = tc.emit(PLAIN_LOOPS, target="cuda")
    kernel_cu = (tmp_path / "s" / "case-1" / "kernel.cu").read_text()
    assert code_shape(kernel_cu)[0].startswith(code_shape(plain)[0])  # the plain source, then its main
