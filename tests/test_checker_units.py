"""The checker's parts against direct evaluation: formulas, the isl and z3 translations, witness
re-checking, the model's accesses, and the isl view (domains, schedule, tau) against enumeration."""
from __future__ import annotations

import itertools

import islpy as isl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecert.checker import isl_solve, solve
from tilecert.checker.check import check_program, check_transform
from tilecert.checker.obligations import bounds
from tilecert.checker.brute import Enumeration
from tilecert.checker.correspondence import correspond
from tilecert.checker.formula import (FALSE, TRUE, And, Const, Env, Or, Var, arith, cmp, cond_of, conj, disj, exists,
                                      holds, negate, term_of, value)
from tilecert.checker.model import Model
from tilecert.checker.polyhedral import polyhedral, tau
from tilecert.checker.solve import Case, search
from tilecert.semantics import loopir as L
from tilecert.semantics.index import IBin, IConst, INot, ISize, IVar, evaluate

from test_checker_catalogue import shared_exchange, status
from test_checker_programs import (add, assign, barrier, decl, guard, ld, lit, loop, lt, program, random_program,
                                   retyped, tensor, transform, v)

NAMES = ("x", "y")


# ----------------------------------------------------------------------------- formulas
@st.composite
def iexpr(draw, depth=3):
    """A random index expression over loop variables 0, 1 and size N (quasi-affine or not)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([IVar(0, 0), IVar(1, 0), ISize("N"), IConst(draw(st.integers(-4, 4)))]))
    op = draw(st.sampled_from(["add", "sub", "mul", "floordiv", "mod", "min", "max"]))
    a = draw(iexpr(depth - 1))
    b = IConst(draw(st.sampled_from([-3, -2, 2, 3]))) if op in ("floordiv", "mod") and draw(st.booleans()) \
        else draw(iexpr(depth - 1))
    return IBin(op, a, b)


@st.composite
def icond(draw, depth=2):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return IBin(draw(st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"])), draw(iexpr(2)), draw(iexpr(2)))
    if draw(st.booleans()):
        return INot(draw(icond(depth - 1)))
    return IBin(draw(st.sampled_from(["and", "or"])), draw(icond(depth - 1)), draw(icond(depth - 1)))


ENV = Env({0: Var("x"), 1: Var("y")})


@settings(max_examples=300, deadline=None)
@given(icond(), st.integers(-5, 5), st.integers(-5, 5), st.integers(0, 5))
def test_conditions_evaluate_as_the_interpreter_evaluates_them(c, x, y, n):
    point = {"x": x, "y": y, "p_N": n}
    try:
        want = bool(evaluate(c, {"N": n}, {(0, 0): x, (1, 0): y}))
    except Exception:  # division by zero: the formula makes the atom false, the interpreter raises
        return
    f = cond_of(c, ENV)
    assert holds(f, point) == want
    assert holds(negate(f), point) == (not want)


@settings(max_examples=200, deadline=None)
@given(iexpr(), st.integers(-6, 6), st.integers(-6, 6))
def test_terms_evaluate_with_python_floor_semantics(e, x, y):
    try:
        want = int(evaluate(e, {"N": 3}, {(0, 0): x, (1, 0): y}))
    except Exception:
        return
    assert value(term_of(e, Env({0: Var("x"), 1: Var("y")}, {"N": 3})), {"x": x, "y": y}) == want


@settings(max_examples=150, deadline=None)
@given(icond())
def test_isl_rendering_agrees_with_evaluation_on_a_box(c):
    f = cond_of(c, Env({0: Var("x"), 1: Var("y")}, {"N": 3}))
    text = isl_solve.render(f)
    if text is None:  # not quasi-affine: z3's business
        return
    s = isl.Set(f"{{ [x, y] : {text} }}")
    for x, y in itertools.product(range(-4, 5), repeat=2):
        point = isl.Set(f"{{ [{x}, {y}] }}")
        assert (not s.intersect(point).is_empty()) == holds(f, {"x": x, "y": y})


@settings(max_examples=60, deadline=None)
@given(icond(), st.integers(-4, 4), st.integers(-4, 4))
def test_search_finds_a_point_exactly_when_one_exists(c, x0, y0):
    # pin the variables to one value: the case is non-empty iff the condition holds there (isl or z3)
    f = cond_of(c, Env({0: Var("x"), 1: Var("y")}, {"N": 3}))
    pinned = conj(f, cmp("eq", Var("x"), Const(x0)), cmp("eq", Var("y"), Const(y0)))
    out = search([Case("c", pinned)], timeout_ms=2000)
    assert out.status != "unknown"
    assert (out.status == "point") == holds(f, {"x": x0, "y": y0})


def test_constants_fold_and_connectives_flatten():
    x = Var("x")
    assert cmp("lt", Const(1), Const(2)) == TRUE and cmp("le", x, x) == TRUE and cmp("lt", x, x) == FALSE
    assert conj(TRUE, cmp("lt", x, Const(3)), conj(cmp("le", Const(0), x))) == And(
        (cmp("lt", x, Const(3)), cmp("le", Const(0), x)))
    assert disj(FALSE, FALSE) == FALSE and disj(cmp("lt", x, Const(1)), TRUE) == TRUE
    assert arith("add", x, Const(0)) == x and arith("mul", Const(2), Const(3)) == Const(6)
    assert isinstance(negate(conj(cmp("lt", x, Const(1)), cmp("eq", x, Const(5)))), Or)


def test_a_point_that_does_not_recheck_is_not_trusted(monkeypatch):
    x = Var("x")
    case = Case("c", conj(cmp("le", Const(0), x), cmp("lt", x, Const(3))))
    monkeypatch.setattr(isl_solve, "first_point", lambda cases: ("c", {"x": 7}))  # a broken solver
    out = solve.search([case])
    assert out.status == "unknown" and "not trusted" in out.reason


@pytest.mark.parametrize("bound, holds_", [(3, True), (0, False)])
def test_a_closed_existential_is_decided_by_its_witness_without_recursing(bound, holds_):
    # exists y: 0 <= y < x and 2y = x - 2, closed at x = 2 * bound (holds exactly when bound > 0), under
    # a disjunction and a conjunction: the residual query's point is re-checked on the body alone
    x, y = Var("x"), Var("y")
    body = conj(cmp("le", Const(0), y), cmp("lt", y, x), cmp("eq", arith("mul", Const(2), y), arith("sub", x, Const(2))))
    f = conj(cmp("le", Const(0), x), disj(cmp("lt", x, Const(0)), exists(("y",), body)))
    assert solve.decide_closed(f, {"x": 2 * bound}) is holds_


def test_unbinding_a_barrier_ordered_exchange_is_decided():
    # the barrier ordered the shared write before another thread's read; a parallel loop without its binding
    # no longer orders them: dependence is disproved (the search re-checks a closed existential on the way)
    p = shared_exchange(True)
    t = transform(p, "bind", "t", "serial")
    r = check_transform(p, t.program, t.tau, {"G": 1}, listed=t.obligations, datamaps=t.datamaps)
    assert status(r, "dependence") == "disproved" and status(r, "noninterference") == "disproved"
    assert "CONFIRMED" in r.verdicts("dependence")[0].witness.replay


def test_an_exception_inside_an_obligation_makes_it_unknown(monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a solver bug")

    monkeypatch.setattr(bounds, "check", broken)
    r = check_program(shared_exchange(True))
    (v,) = r.verdicts("bounds")
    assert v.status == "unknown" and "ZeroDivisionError: a solver bug" in v.reason and not r.ok
    assert status(r, "noninterference") == "proved"


def test_z3_floor_division_matches_python_for_negative_divisors():
    x = Var("x")
    for d in (-3, -2, 2, 3):
        for a in range(-7, 8):
            f = conj(cmp("eq", x, Const(a)), cmp("ne", arith("floordiv", x, Const(d)), Const(a // d)))
            g = conj(cmp("eq", x, Const(a)), cmp("ne", arith("mod", x, Const(d)), Const(a % d)))
            assert search([Case("f", f), Case("g", g)]).status == "empty", (a, d)


# ----------------------------------------------------------------------------- the model
def test_loads_under_selects_are_guarded_or_may():
    index_sel = L.Sel(L.Ix(lt(v(0), 2), "bool"), ld("X", v(0)), ld("Y", v(0)), "i32")
    data_sel = L.Sel(ld("C", v(0)), ld("X", 0), lit(0), "i32")
    p = program("s", ("N",), [tensor(n, ("N",)) for n in ("A", "X", "Y", "C")],
                loop(0, "i", "N", assign("A", (v(0),), L.Bin("add", index_sel, data_sel, "i32"))))
    m = Model(p)
    accs = {(a.buffer.name, a.guards != (), a.may) for a in m.statements[0].accesses}
    assert accs == {("X", True, False), ("Y", True, False), ("C", False, False), ("X", False, True),
                    ("A", False, False)}


def test_buffers_resolve_lexically():
    body = lambda k: loop(k, f"l{k}", 2, decl("t", (2,)), assign("t", (v(k),), lit(k)))  # noqa: E731
    p = program("lex", (), [tensor("A", (2,))], body(0), body(1))
    m = Model(p)
    targets = [s.target for s in m.statements if s.kind == "assign"]
    assert targets[0] is not targets[1] and targets[0].decl is not targets[1].decl


def test_ill_formed_programs_are_recorded():
    p = program("bad", ("N",), [tensor("A", ("N",))],
                loop(0, "i", "N", assign("B", (v(0),), lit(1)), guard(lt(v(3), 1), barrier())))
    problems = Model(p).problems
    assert any("accesses B" in x for x in problems) and any("r3" in x for x in problems)


# ----------------------------------------------------------------------------- the isl view against enumeration
def _points(s: isl.Set) -> int:
    count = [0]
    s.foreach_point(lambda _: count.__setitem__(0, count[0] + 1))
    return count[0]


@settings(max_examples=40, deadline=None)
@given(random_program())
def test_isl_domains_count_the_instances(p):
    sizes = {"N": 3}
    m = Model(p, sizes)
    view = polyhedral(m)
    e = Enumeration(m, sizes)
    sets = view.domains.get_set_list()
    counts = {sets.get_at(i).get_tuple_name(): _points(sets.get_at(i)) for i in range(sets.n_set())}
    for s in m.statements:
        assert counts.get(f"S{s.id}", 0) == len(e.instances(s))


@settings(max_examples=40, deadline=None)
@given(random_program())
def test_isl_schedule_orders_instances_as_the_program_runs(p):
    # with every loop serial, the schedule's lexicographic order is the happens-before order
    for lp in list(L.loops(p.body)):
        p = retyped(p, lp.name, kind="serial")
    sizes = {"N": 2}
    m = Model(p, sizes)
    e = Enumeration(m, sizes)
    sched = polyhedral(m).schedule
    stamp = {}
    for s in m.statements:
        for x in e.instances(s):
            pt = isl.Set(f"{{ S{s.id}[{', '.join(map(str, x.coords))}] }}") if x.coords else isl.Set(f"{{ S{s.id}[] }}")
            image = sched.intersect_domain(pt.to_union_set()).range().get_set_list().get_at(0).sample_point()
            stamp[x] = tuple(image.get_coordinate_val(isl.dim_type.set, i).to_python()
                             for i in range(image.get_space().dim(isl.dim_type.set)))
    for x, y in itertools.permutations(stamp, 2):
        assert (stamp[x] < stamp[y]) == e.hb(x, y)


def test_tau_of_a_split_is_a_bijection_onto_the_old_domain():
    p = program("sp", ("N",), [tensor("A", ("N",))], loop(0, "i", "N", assign("A", (v(0),), lit(1))))
    t = transform(p, "split", "i", 3)
    c = correspond(Model(p), Model(t.program), t.tau, 2000)
    mp, skipped = tau(c)
    assert not skipped and mp.is_bijective()
    assert mp.range().is_equal(polyhedral(Model(p)).domains)


def test_accesses_and_phases_of_a_block_program():
    view = polyhedral(Model(shared_exchange(True), {"G": 2}))
    assert not view.not_affine
    writes = str(view.writes)
    assert "sh_d0[i0, e0]" in writes and "sh_d0[i0, i1]" in writes  # the allocation writes every cell
    assert "sh_d0[i0, 31 - i1]" in str(view.reads)
    # thread coordinates are erased in the phase vectors: the barrier separates the two statements
    phases = view.phases
    assert "[0, i0, 1, 0, 1, 0]" in str(phases) and "[0, i0, 1, 0, 2, 0]" in str(phases)


@pytest.mark.parametrize("guarded", [False, True])
def test_non_affine_parts_are_named(guarded):
    ext = IBin("mul", ISize("N"), ISize("N"))
    body = assign("A", (v(0),), lit(1))
    p = program("na", ("N",), [tensor("A", (add("N", 0),))], loop(0, "i", ext if guarded else "N", body))
    assert bool(polyhedral(Model(p)).not_affine) == guarded
