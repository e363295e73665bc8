"""Bad input through the public API raises a typed TilecertError with a hint, never a bare exception."""
from __future__ import annotations

import json

import numpy as np
import pytest

import tilecert as tc
from tilecert.cli import main
from tilecert.semantics.errors import SerializationError

from examples import EXAMPLES

GEMM = EXAMPLES["gemm"].kernel


def raises_typed(exc_type: type, fn, *args, **kwargs) -> tc.TilecertError:
    with pytest.raises(exc_type) as info:
        fn(*args, **kwargs)
    assert info.value.hint
    return info.value


def test_load_rejects_a_non_text_argument():
    raises_typed(SerializationError, tc.load, 3)


def test_load_rejects_a_field_of_the_wrong_type():
    tree = json.loads(tc.dump(tc.capture(GEMM)))
    tree["body"]["ops"][0]["body"]["ops"][0]["out"]["type"] = "zzz"
    err = raises_typed(SerializationError, tc.load, json.dumps(tree))
    assert "field 'type'" in str(err)
    tree = json.loads(tc.dump(tc.capture(GEMM)))
    tree["tensors"] = 5
    raises_typed(SerializationError, tc.load, json.dumps(tree))
    tree["tensors"], tree["body"] = [], {"_": "IConst", "value": 3}
    raises_typed(SerializationError, tc.load, json.dumps(tree))


def test_loop_form_still_round_trips():
    p = tc.expand(tc.capture(GEMM))
    assert tc.load(tc.dump(p)) == p


@pytest.mark.parametrize("fn", [tc.dump, tc.digest, tc.format_program, tc.expand])
def test_program_functions_reject_a_non_program(fn):
    raises_typed(tc.TilecertError, fn, 42)


def test_schedule_load_of_a_missing_file(tmp_path):
    err = raises_typed(SerializationError, tc.Schedule.load, tmp_path / "nope.json", GEMM)
    assert "nope.json" in str(err)


@pytest.mark.parametrize("trials", ["x", 0, 2.5])
def test_differential_rejects_bad_trials(trials):
    s = tc.schedule(GEMM, M=4, N=4, K=4)
    raises_typed(tc.InputError, tc.differential, s, trials=trials)


def test_cli_diff_of_a_missing_fuzz_case(tmp_path, capsys):
    assert main(["diff", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_schedule_error_is_exported():
    with pytest.raises(tc.ScheduleError):
        tc.schedule(GEMM, M=8, N=8, K=8).split("nest.0", "4")


# ----------------------------------------------------------------------------- schedule files: the schema
def _schedule_json() -> dict:
    s = tc.schedule(GEMM, M=8, N=8, K=8)
    s.split("nest.0", 2)
    s.swap("nest.0.o", "nest.0.i")
    return json.loads(s.to_json())


def _with(path: tuple, value) -> str:
    data = _schedule_json()
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(data)


HUGE = 2**63
BAD_SCHEDULES = {  # name: (text, what the message names)
    "not an object": ("[1, 2]", "JSON object"),
    "not JSON": ("{", "not JSON"),
    "history not a list": (_with(("history",), {"split": {}}), "'history'"),
    "history a string": (_with(("history",), "split"), "'history'"),
    "entry not a pair": (_with(("history", 0), ["split"]), "history entry 0"),
    "entry args a list": (_with(("history", 1), ["swap", ["nest.0.o", "nest.0.i"]]), "history entry 1"),
    "entry a number": (_with(("history", 1), 7), "history entry 1"),
    "unknown op": (_with(("history", 1, 0), "explode"), "history entry 1: unknown schedule op"),
    "unhashable op name": (_with(("history", 0, 0), ["split"]), "history entry 0: unknown schedule op"),
    "op name null": (_with(("history", 0, 0), None), "history entry 0"),
    "unknown argument": (_with(("history", 0, 1, "colour"), "red"), "no parameter 'colour'"),
    "missing argument": (json.dumps({**_schedule_json(), "history": [["split", {"loop": "nest.0"}]]}),
                         "lacks argument 'factor'"),
    "factor a string": (_with(("history", 0, 1, "factor"), "2"), "argument 'factor'"),
    "factor a bool": (_with(("history", 0, 1, "factor"), True), "argument 'factor'"),
    "factor a float": (_with(("history", 0, 1, "factor"), 2.0), "argument 'factor'"),
    "factor beyond int64": (_with(("history", 0, 1, "factor"), HUGE), "argument 'factor'"),
    "loop a list": (_with(("history", 0, 1, "loop"), ["nest.0"]), "argument 'loop'"),
    "bound_sizes smuggled": (_with(("history", 0, 1, "bound_sizes"), {"M": 8}), "no parameter 'bound_sizes'"),
    "factor zero": (_with(("history", 0, 1, "factor"), 0), "split argument 'factor' holds 0, not a positive int"),
    "unknown loop": (_with(("history", 1, 1, "outer"), "zz"), "history entry 1 (swap) does not replay"),
    "sizes a list": (_with(("sizes",), [8, 8, 8]), "'sizes'"),
    "size a string": (_with(("sizes", "M"), "8"), "'sizes'"),
    "size a bool": (_with(("sizes", "M"), True), "'sizes'"),
    "size beyond int64": (_with(("sizes", "M"), HUGE), "'sizes'"),
    "size negative": (_with(("sizes", "M"), -1), "size M is -1"),
    "size named like a parameter": (_with(("sizes", "kernel"), 3), "unknown size or config 'kernel'"),
    "size and config at once": (json.dumps({**_schedule_json(), "sizes": {"bm": 3}, "config": {"bm": 3}}),
                                "both a size and a config value"),
    "config a list": (_with(("config",), [3]), "'config'"),
    "config a string": (_with(("config", "bm"), "3"), "'config'"),
    "config a float for an int": (_with(("config", "bm"), 3.5), "config bm=3.5"),
    "config a bool for an int": (_with(("config", "bm"), True), "config bm=True"),
    "kernel not a str": (_with(("kernel",), 5), "'kernel'"),
    "digest not a str": (_with(("digest",), 5), "'digest'"),
    "unknown field": (_with(("extra",), 1), "unknown field 'extra'"),
    "no history": (json.dumps({k: v for k, v in _schedule_json().items() if k != "history"}), "no 'history'"),
    "duplicate key": ('{"kernel": "gemm", "kernel": "gemm", "sizes": {}, "config": {}, "history": []}',
                      "duplicate key 'kernel'"),
    "deep nesting": ("[" * 100000 + "]" * 100000, "nested"),
    "deep but parseable": ('{"kernel": "gemm", "sizes": {}, "config": {}, "history": ' + "[" * 900 + "]" * 900
                           + "}", "nested"),
}


@pytest.mark.parametrize("name", sorted(BAD_SCHEDULES))
def test_a_malformed_schedule_file_is_a_serialization_error(name):
    text, expected = BAD_SCHEDULES[name]
    err = raises_typed(SerializationError, tc.Schedule.from_json, text, GEMM)
    assert expected in err.message, err.message


def test_the_schema_accepts_what_to_json_writes():
    s = tc.Schedule.from_json(json.dumps(_schedule_json()), GEMM)
    assert [op for op, _ in s.history] == ["split", "swap"]


def test_saving_a_schedule_to_a_folder_or_a_missing_folder(tmp_path):
    s = tc.schedule(GEMM, M=8, N=8, K=8)
    for where in (tmp_path, tmp_path / "missing" / "s.json"):
        err = raises_typed(SerializationError, s.save, where)
        assert "cannot write schedule file" in err.message
    s.save(tmp_path / "s.json")
    assert tc.Schedule.load(tmp_path / "s.json", GEMM).history == s.history


def test_loading_a_schedule_from_a_folder_or_binary_file(tmp_path):
    raises_typed(SerializationError, tc.Schedule.load, tmp_path, GEMM)
    (tmp_path / "b.json").write_bytes(b"\xff\xfe\x00")
    raises_typed(SerializationError, tc.Schedule.load, tmp_path / "b.json", GEMM)


# ----------------------------------------------------------------------------- schedules of programs
def test_a_schedule_of_a_program_replays_like_one_of_the_kernel():
    s = tc.schedule(GEMM, M=8, N=8, K=8, bm=4)
    s.split("nest.0", 2)
    program = tc.load(tc.dump(tc.capture(GEMM, bm=4)))
    back = tc.Schedule.from_json(s.to_json(), program)
    assert tc.digest(back.program) == tc.digest(s.program)
    assert tc.Schedule.create(program, M=8).sizes == {"M": 8}
    err = raises_typed(tc.ScheduleError, tc.Schedule.create, program, bm=5)
    assert "fixes config bm=4" in err.message
    raises_typed(tc.ScheduleError, tc.Schedule.create, program, Q=3)
    raises_typed(tc.ScheduleError, tc.Schedule.create, program, M=True)
    raises_typed(tc.ScheduleError, tc.Schedule.create, program, M=HUGE)
    raises_typed(tc.TilecertError, tc.Schedule.create, "gemm")


# ----------------------------------------------------------------------------- program files
def _program_tree() -> dict:
    return json.loads(tc.dump(tc.capture(GEMM)))


def _program_with(mutate) -> str:
    tree = _program_tree()
    mutate(tree)
    return json.dumps(tree)


BAD_PROGRAMS = {
    "bool as an int": _program_with(lambda t: t["tensors"][0]["dims"][0].update(id=True)),
    "int beyond int64": _program_with(lambda t: t["tensors"][0]["dims"][0].update(id=HUGE)),
    "float as an int": _program_with(lambda t: t["tensors"][0]["dims"][0].update(id=1.0)),
    "unhashable node name": _program_with(lambda t: t.update({"_": ["Program"]})),
    "node name a number": _program_with(lambda t: t.update({"_": 3})),
    "unknown field": _program_with(lambda t: t.update(colour="red")),
    "written not a bool": _program_with(lambda t: t["tensors"][0].update(written=1)),
    "duplicate key": tc.dump(tc.capture(GEMM)).replace('{"_": "Program",', '{"_": "Program", "name": "x",'),
    "deep nesting": "[" * 100000 + "]" * 100000,
    "deep but parseable": '{"_": "Program", "name": ' + "[" * 900 + "]" * 900 + "}",
    "not JSON": '{"_": ',
    "bytes not UTF-8": b"\xff\xfe{",
    "a list": "[]",
}


@pytest.mark.parametrize("name", sorted(BAD_PROGRAMS))
def test_a_malformed_program_file_is_a_serialization_error(name):
    raises_typed(SerializationError, tc.load, BAD_PROGRAMS[name])


def test_duplicate_key_is_named():
    err = raises_typed(SerializationError, tc.load, BAD_PROGRAMS["duplicate key"])
    assert "duplicate key 'name'" in err.message


# ----------------------------------------------------------------------------- fuzz case files run no code
MALICIOUS = '''
import pathlib, sys
pathlib.Path({marker!r}).write_text("ran")
sys.exit(0)
'''


def _case_file(tmp_path, **fields) -> "Path":
    from tilecert.backends.fuzz import FuzzCase
    s = tc.schedule(GEMM, M=5, N=6, K=7)
    s.split("nest.0", 2)
    data = json.loads(FuzzCase(tc.dump(tc.capture(GEMM)), s.to_json(), seed=3, kernel="gemm").to_json())
    data.update(fields)
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "case.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("with_program", [True, False])
def test_a_case_file_with_python_source_is_refused_and_runs_nothing(tmp_path, capsys, with_program):
    marker = tmp_path / "marker"
    path = _case_file(tmp_path, source=MALICIOUS.format(marker=str(marker)),
                      **({} if with_program else {"program": None}))
    assert main(["diff", str(path), "--trials", "1"]) == 2
    err = capsys.readouterr().err
    assert "carries Python source" in err and "--trust-source" in err
    assert not marker.exists()


def test_trust_source_is_what_lets_a_case_run_its_source(tmp_path):
    from tilecert.backends.fuzz import FuzzCase
    marker = tmp_path / "marker"
    source = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n" + \
        open(GEMM.fn.__code__.co_filename).read()
    case = FuzzCase.from_json(_case_file(tmp_path, source=source, program=None).read_text())
    s = case.schedule_for(load_source=tc.strategies.kernel_from_source)
    assert marker.read_text() == "ran" and [op for op, _ in s.history] == ["split"]


def test_a_case_file_replays_from_its_ir(tmp_path, capsys):
    path = _case_file(tmp_path)
    assert "source" not in json.loads(path.read_text())
    assert main(["diff", str(path), "--trials", "1"]) == 0
    assert "MATCH" in capsys.readouterr().out


@pytest.mark.parametrize("fields", [{"seed": -1}, {"seed": True}, {"seed": HUGE}, {"format": "x"},
                                    {"program": [1]}, {"schedule": "text"}, {"kernel": 3}, {"extra": 1},
                                    {"program": None}])
def test_a_malformed_case_file_is_a_serialization_error(tmp_path, fields):
    from tilecert.backends.fuzz import FuzzCase
    raises_typed(SerializationError, FuzzCase.from_json, _case_file(tmp_path, **fields).read_text())


def test_a_case_whose_program_is_tampered_is_refused(tmp_path):
    from tilecert.backends.fuzz import FuzzCase
    data = json.loads(_case_file(tmp_path).read_text())
    data["program"]["tensors"][0]["written"] = "yes"
    case = FuzzCase.from_json(json.dumps(data))
    raises_typed(SerializationError, case.schedule_for)


@pytest.mark.parametrize("field, bad", [('"dtype": "f32"', '"dtype": "x"'), ('"bounds": "zero"', '"bounds": "x"'),
                                        ('"fn": "exp"', '"fn": "x"'), ('"op": "mul"', '"op": "pow"')])
def test_loaded_programs_name_only_known_dtypes_policies_and_ops(field, bad):
    text = tc.dump(tc.capture(EXAMPLES["softmax"].kernel))
    assert field in text
    with pytest.raises(tc.SerializationError, match="not one of"):
        tc.load(text.replace(field, bad, 1))


def test_a_zero_block_size_is_a_capture_error_not_a_proved_program():
    with pytest.raises(tc.CaptureError, match="cdiv by zero"):
        tc.emit(EXAMPLES["elementwise"].kernel, bn=0)


@pytest.mark.parametrize("call", [lambda s: s.check(bogus=1), lambda s: s.check(sizes=[("M", 3)]), lambda s: s.save(3)])
def test_schedule_methods_refuse_wrong_arguments_with_typed_errors(call):
    s = tc.schedule(EXAMPLES["transpose"].kernel)
    with pytest.raises(tc.TilecertError) as info:
        call(s)
    assert info.value.hint
