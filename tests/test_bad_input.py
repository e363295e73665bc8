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
