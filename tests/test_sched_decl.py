"""Op declarations: every registered op declares its argument kinds once, and validation, error text,
``Schedule`` methods, schedule-file schema checking and the strategies all come from that declaration.

Each op gets one known-good call on the GEMM example (``GOOD``; on ``siblings`` for the ops whose
preconditions no loop of the fresh GEMM meets: ``CASES_OF``); the wrong values tried for each
parameter are built here from the parameter's kind (``wrong_values``), independently of the kinds'
own code, each marked structural (the schema refuses it in a file) or not (only the program can
refuse it: a loop that does not exist, a list of the wrong length).
"""
from __future__ import annotations

import inspect
import json
import pydoc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

import tilecert as tc
from examples import EXAMPLES
from tilecert import i32, strategies
from tilecert.semantics.errors import SerializationError
from tilecert.semantics.sched import OPS, Schedule, install_methods, schedule_op
from tilecert.semantics.sched import args as A
from tilecert.semantics.sched.args import matches
from tilecert.semantics.sched.base import ScheduleError, the_loop
from tilecert.semantics.transform import Tau, Transformed
from tilecert.semantics.sched.schema import op_schema
from tilecert.semantics.sched.split import split

KERNEL = EXAMPLES["gemm_i32"].kernel
SIZES = dict(M=8, N=8, K=7)  # K = 7 = bk: loop k runs once (remove_unit)
GOOD: dict[str, dict[str, Any]] = {
    "split": dict(loop="nest.0", factor=2), "coalesce": dict(loops=["acc.full.p1", "acc.full.p0"]),
    "reshape": dict(loop="a.load.K", extents=[7, 1]), "fuse": dict(outer="C.store.M", inner="C.store.N"),
    "reorder": dict(loops=["C.store.M", "C.store.N"]), "swap": dict(outer="C.store.M", inner="C.store.N"),
    "tile": dict(loops=["C.store.M", "C.store.N"], sizes=[2, 2]), "insert_unit": dict(loop="k"),
    "remove_unit": dict(loop="k"), "bind": dict(loop="nest.0", kind="grid0"), "expand_zero": dict(buffer="acc"),
    "pad": dict(loop="a.load.K", to_multiple_of=8), "partition": dict(loop="a.load.K", breakpoints=[3]),
    "unroll": dict(loop="a.load.K"), "privatize": dict(target="acc", over="acc.mma.K"),
    "fission": dict(loop="i", after="A"), "merge": dict(first="i", second="j"),
    "stage": dict(source="A", tile_loops=["a.load.M", "a.load.K"]), "constant": dict(tensor="A"),
    "expand_dim": dict(buffer="acc", loops=["nest.1", "nest.0"]), "lift_alloc": dict(buffer="acc", loop="nest.1"),
    "modulo": dict(loop="k", interval=1, offsets={"load": 0, "compute": 1}, window=2, versions={"a": 2},
                   waits=[["load", "compute", "a"]], releases={"a": ["compute"]}),
}


@tc.kernel
def siblings(X: tc.Tensor[i32, "N"], A: tc.Tensor[i32, "N"], B: tc.Tensor[i32, "N"]):
    """Two sibling loops over one range; no local of the first's body is used on both sides of a cut after A
    (in the fresh GEMM every cut of a body splits the uses of a local, and no two siblings share a range)."""
    N = X.shape[0]
    for i in tc.serial(N):
        A.at(i.index()).store(X.at(i.index()).load())
        B.at(i.index()).store(X.at(i.index()).load())
    for j in tc.serial(N):
        B.at(j.index()).store(A.at(j.index()).load())


CASES_OF = {"fission": (siblings, {"N": 5}), "merge": (siblings, {"N": 5})}


def kernel_of(op: str = "") -> Any:
    return CASES_OF.get(op, (KERNEL, SIZES))[0]


def fresh(op: str = "") -> Schedule:
    kernel, sizes = CASES_OF.get(op, (KERNEL, SIZES))
    return tc.schedule(kernel, **sizes)


def wrong_values(kind: A.Kind, good: Any) -> list[tuple[Any, bool]]:
    """Values ``kind`` must refuse, each with whether the schema alone refuses it (``good``: a value it
    accepts, or None)."""
    if isinstance(kind, A.Optional):
        return [(v, structural) for v, structural in wrong_values(kind.kind, good) if v is not None]
    if isinstance(kind, A.PosInt):
        return [(0, True), (-3, True), (True, True), ("2", True), (2.0, True), (2**63, True)]
    if isinstance(kind, A.NonNegInt):
        return [(-1, True), (True, True), ("2", True), (2.0, True), (2**63, True)]
    if isinstance(kind, A.Int):
        return [(True, True), ("2", True), (1.5, True), (2**63, True), (-(2**63) - 1, True)]
    if isinstance(kind, A.Bool):
        return [(1, True), ("yes", True), (None, True)]
    if isinstance(kind, A.Enum):
        return [("no-such-choice", True), (3, True), (None, True)]
    if isinstance(kind, A.LoopName):
        return [(3, True), (["nest.0"], True), ("no-such-loop", False)]
    if isinstance(kind, A.NewLoopName):
        return [("", True), (3, True)]
    if isinstance(kind, A.BufferName):
        return [(3, True), ("no-such-buffer", False)]
    if isinstance(kind, A.StatementName):
        return [(3, True), (["A"], True), ("no-such-statement", False)]
    if isinstance(kind, A.StageName):
        return [(-1, True), (True, True), (["load"], True), ("no-such-stage", False)]
    if isinstance(kind, A.TupleOf):
        return [("x", True), (list(good[:-1]), True), (list(good) + [good[-1]], True)] + [
            ([*good[:k], bad, *good[k + 1:]], s) for k, item in enumerate(kind.kinds)
            for bad, s in wrong_values(item, good[k])]
    if isinstance(kind, A.MapOf):  # a key is a JSON object's key, a str: only the program refuses a wrong one
        key, value = next(iter(good.items()))
        return [("x", True), ([key], True)] + [({**good, key: bad}, s) for bad, s in wrong_values(kind.value, value)] \
            + [({bad: value}, False) for bad, _ in wrong_values(kind.key, key) if isinstance(bad, str)]
    assert isinstance(kind, A.ListOf), f"no wrong values for kind {kind!r}: add them here"
    out: list[tuple[Any, bool]] = [("x", True), ({"a": 1}, True)] + \
        ([(list(range(1, kind.min_len)), True)] if kind.min_len else [])
    if good is not None:
        out += [([bad] + list(good[1:]), s) for bad, s in wrong_values(kind.item, good[0])]
        if kind.distinct:
            out.append(([good[0]] * len(good), True))
        if kind.length_of:
            out.append((list(good) + [good[-1]], False))
    return out


def parts(value: Any) -> list[Any]:
    """``value`` and everything nested in it (a dict's keys and values, a list's items)."""
    inner = [x for kv in value.items() for x in kv] if isinstance(value, dict) else value if isinstance(
        value, list) else []
    return [value] + [y for x in inner for y in parts(x)]


def expectations(kind: A.Kind) -> set[str]:
    """How a refusal may word what ``kind`` expects: its own words, or those of the kind inside it
    (an optional value, a list's item)."""
    inner = [getattr(kind, "kind", None) or getattr(kind, "item", None), getattr(kind, "key", None),
             getattr(kind, "value", None), *getattr(kind, "kinds", ())]
    return {kind.expected}.union(*(expectations(k) for k in inner if isinstance(k, A.Kind)))


CASES = [(op, q.name, bad, structural) for op in sorted(OPS) for q in OPS[op].recorded
         for bad, structural in wrong_values(q.kind, GOOD[op].get(q.name))]


def test_every_op_is_declared_and_has_a_good_call():
    assert set(OPS) == set(GOOD)
    for name, decl in OPS.items():
        assert decl.name == name and decl.params, name
        assert all(isinstance(q.kind, A.Kind) for q in decl.params)
        assert set(GOOD[name]) >= {q.name for q in decl.recorded if q.required}
        handles = fresh(name).apply(name, **GOOD[name])
        assert isinstance(handles, tuple)


@pytest.mark.parametrize("op", sorted(OPS))
def test_declarations_match_the_op_functions_and_the_schedule_methods(op):
    decl = OPS[op]
    fn_params = list(inspect.signature(decl.fn).parameters.values())[1:]
    assert [(q.name, q.default, q.keyword_only) for q in decl.params] == \
        [(q.name, q.default, q.kind is q.KEYWORD_ONLY) for q in fn_params]
    method = inspect.signature(getattr(Schedule, op))
    assert list(method.parameters)[0] == "self"
    assert [(q.name, q.default) for q in list(method.parameters.values())[1:]] == \
        [(q.name, q.default) for q in fn_params if q.name != "bound_sizes"]
    assert all(q.kind.supplied == (q.name == "bound_sizes") for q in decl.params)
    text = pydoc.render_doc(getattr(Schedule, op))
    doc_head = (inspect.getdoc(decl.fn) or inspect.getdoc(inspect.getmodule(decl.fn))).splitlines()[0]
    assert doc_head in text
    for q in decl.recorded:
        assert f"{q.name}: {q.kind.expected}" in text


def test_schedule_methods_are_real_attributes():
    assert "__getattr__" not in vars(Schedule)
    for op in OPS:
        assert callable(vars(Schedule)[op])
    with pytest.raises(AttributeError):
        fresh().no_such_op  # noqa: B018


@pytest.mark.parametrize("op,param,bad,structural", CASES, ids=[f"{c[0]}.{c[1]}={c[2]!r}" for c in CASES])
def test_a_wrong_argument_is_a_schedule_error_naming_op_parameter_kind_and_value(op, param, bad, structural):
    s = fresh(op)
    with pytest.raises(ScheduleError) as info:
        s.apply(op, **{**GOOD[op], param: bad})
    message = info.value.message
    assert message.startswith(f"{op}: {param}"), message
    kind = next(q.kind for q in OPS[op].recorded if q.name == param)
    assert any(f"must be {text}, got" in message for text in expectations(kind)), message
    shown = repr(bad)[:20] in message or f"{param}[0] must be" in message and f"got {bad[0]!r}" in message
    if isinstance(bad, (dict, list)):  # validated part by part (a dict's entries, a list's items): it shows the part
        shown = shown or (f"{param}[" in message or f"{param} key" in message) and any(
            f"got {x!r}" in message for x in parts(bad))
    assert shown, message
    assert info.value.hint
    assert s.history == [] and s.program is s.initial  # nothing applied


@pytest.mark.parametrize("op,param,bad,structural", CASES, ids=[f"{c[0]}.{c[1]}={c[2]!r}" for c in CASES])
def test_a_schedule_file_with_a_wrong_argument_is_refused(op, param, bad, structural):
    s = fresh(op)
    s.apply(op, **GOOD[op])
    data = json.loads(s.to_json())
    data["history"][0][1][param] = bad
    assert matches(bad, op_schema(OPS[op])["properties"][param]) != structural
    with pytest.raises(SerializationError) as info:
        Schedule.from_json(json.dumps(data), kernel_of(op))
    expected = f"history entry 0: {op} argument {param!r}" if structural else f"history entry 0 ({op}) does not replay"
    assert expected in info.value.message, info.value.message


@pytest.mark.parametrize("op", sorted(OPS))
def test_each_op_round_trips_through_json(op):
    s = fresh(op)
    s.apply(op, **GOOD[op])
    data = json.loads(s.to_json())
    assert data["history"] == [[op, GOOD[op]]]
    for [name, args] in data["history"]:
        assert matches(args, {"type": "object"}) and all(
            matches(v, op_schema(OPS[name])["properties"][k]) for k, v in args.items())
    back = Schedule.from_json(s.to_json(), kernel_of(op))
    assert back.history == s.history and tc.digest(back.program) == tc.digest(s.program)


def test_a_missing_or_unknown_argument_is_refused_in_a_file_and_a_call():
    s = fresh()
    s.split("nest.0", 2)
    data = json.loads(s.to_json())
    del data["history"][0][1]["factor"]
    with pytest.raises(SerializationError, match="split lacks argument 'factor'"):
        Schedule.from_json(json.dumps(data), KERNEL)
    with pytest.raises(ScheduleError, match="missing a required argument: 'factor'") as info:
        fresh().split("nest.0")
    assert "split(loop: str, factor: int" in info.value.hint
    with pytest.raises(ScheduleError, match="bound_sizes come from the schedule"):
        fresh().remove_unit("k", bound_sizes={"K": 7})


def test_direct_calls_of_op_functions_are_validated_too():
    p = fresh().program
    with pytest.raises(ScheduleError, match="split: loop must be a loop name, got 'nope': no loop named 'nope'") as info:
        split(p, "nope", 2)
    assert "nest.0" in info.value.hint  # the loops that exist
    assert split(p, "nest.0", 2).handles == ("nest.0.o", "nest.0.i")


def test_schema_fragments_read_as_json_schema():
    """``matches`` against hand-decided cases of each construct it reads."""
    cases = [({"type": "integer", "minimum": 1, "maximum": 5}, [(1, True), (5, True), (0, False), (6, False),
                                                               (True, False), (2.0, False)]),
             ({"type": "string", "minLength": 1}, [("a", True), ("", False), (None, False)]),
             ({"type": "string", "enum": ["a", "b"]}, [("a", True), ("c", False), (1, False)]),
             ({"enum": [1]}, [(1, True), (True, False), (1.0, False)]),
             ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "uniqueItems": True},
              [([1, 2], True), ((1, 2), True), ([1], False), ([1, 1], False), ([1, "2"], False), ("12", False)]),
             ({"anyOf": [{"type": "boolean"}, {"type": "null"}]}, [(None, True), (False, True), (0, False)])]
    for schema, values in cases:
        for value, want in values:
            assert matches(value, schema) is want, (schema, value)


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(strategies.op_calls(tc.schedule(KERNEL, **SIZES).program, SIZES))
def test_drawn_arguments_fit_their_declared_kinds(call):
    op, kwargs = call
    schema = op_schema(OPS[op])
    assert set(kwargs) <= set(schema["properties"]) and set(schema["required"]) <= set(kwargs)
    for name, value in kwargs.items():
        assert matches(value, schema["properties"][name]), (op, name, value)


def test_a_new_op_declares_once_and_gets_validation_a_method_a_schema_and_draws():
    @schedule_op("rename_test", [A.LoopName(), A.NewLoopName()])
    def rename_test(p, loop: str, name: str) -> Transformed:
        """rename_test(loop, name): give loop ``loop`` the name ``name`` (a test op)."""
        import dataclasses
        from tilecert.semantics.sched.base import replace_loop, with_body
        lp = the_loop(p, loop, "rename_test")
        return Transformed(with_body(p, replace_loop(p.body, lp, [dataclasses.replace(lp, name=name)])), Tau(), ())

    try:
        install_methods()
        s = fresh()
        assert str(inspect.signature(Schedule.rename_test)).startswith("(self, loop: str, name: str)")
        assert s.rename_test("nest.0", "rows") == () and s.loops()[0].name == "rows"
        with pytest.raises(ScheduleError, match="rename_test: name must be a new loop name"):
            s.rename_test("rows", "")
        back = Schedule.from_json(s.to_json(), KERNEL)
        assert back.loops()[0].name == "rows"
        drawn: set[str] = set()

        @settings(max_examples=400, derandomize=True, deadline=None, database=None)  # one op among ~20
        @given(strategies.op_calls(s.program))
        def collect(call):
            drawn.add(call[0])

        collect()
        assert "rename_test" in drawn
    finally:
        OPS.pop("rename_test")
        delattr(Schedule, "rename_test")


def test_a_declaration_must_fit_the_function():
    with pytest.raises(TypeError, match="1 argument kinds declared for parameters"):
        @schedule_op("mismatched_test", [A.LoopName()])
        def mismatched_test(p, loop: str, factor: int) -> Transformed:
            raise AssertionError
    with pytest.raises(TypeError, match="keyword-only"):
        @schedule_op("supplied_test", [A.LoopName(), A.BoundSizes()])
        def supplied_test(p, loop: str, bound_sizes=None) -> Transformed:
            raise AssertionError
    assert "mismatched_test" not in OPS and "supplied_test" not in OPS
