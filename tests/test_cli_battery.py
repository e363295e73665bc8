"""A battery of bad command lines and bad user files: each one exits 2 (or 1 for a disproved check) with
exactly ``error: FILE:LINE: message`` and ``hint: ...`` on stderr, located in the user's file or on
``<command line>`` (never in tilecert, the installed script or the caller), and no traceback."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tilecert.cli import main

from examples import EXAMPLES

HERE = Path(__file__).resolve().parent
GEMM_FILE = Path(EXAMPLES["gemm"].kernel.fn.__code__.co_filename)
ERROR = re.compile(r"^error: (?P<file>.+?):(?P<line>\d+): (?P<message>\S.*)$")

USER_FILES = {
    "raises.py": "import tilecert as tc\nx = 1 / 0\n",
    "bad.py": "def f(:\n    pass\n",
    "exits.py": "import sys\nsys.exit(0)\n",
    "exits3.py": "raise SystemExit(3)\n",
    "imports.py": "import tilecert_no_such_module\n",
    "empty.py": "X = 1\n",
    "kernel_raises.py": ("import tilecert as tc\nfrom tilecert import f32\n\n\n@tc.kernel\n"
                         "def k(X: tc.Tensor[f32, 'N'], Y: tc.Tensor[f32, 'N']):\n"
                         "    raise ValueError('boom')\n"),
    "library_raises.py": ("import numpy as np\nimport tilecert as tc\nfrom tilecert import f32\n\n\n@tc.kernel\n"
                          "def k(X: tc.Tensor[f32, 'N'], Y: tc.Tensor[f32, 'N']):\n    np.zeros(-1)\n"),
    "lookup.py": "table = {}\nvalue = table['missing']\n",
}


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name, text in USER_FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "binary.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / "notpy.txt").write_text("hello\n")
    (tmp_path / "binary.json").write_bytes(b"\x80\x81{")
    (tmp_path / "folder.py").mkdir()
    (tmp_path / "afile").write_text("x")
    for name in ("numpy.py", "tilecert.py"):
        shutil.copyfile(GEMM_FILE, tmp_path / name)
    for name in ("racy.py", "half.py", "dsl.py"):
        shutil.copyfile(HERE / "cli_files" / name, tmp_path / name)
    (tmp_path / "notcase.json").write_text(json.dumps({"format": "other"}))
    (tmp_path / "broken.json").write_text('{"format": "tilecert-fuzz-case",\n  "seed": }')
    (tmp_path / "source.json").write_text(json.dumps({"format": "tilecert-fuzz-case", "kernel": "k",
                                                      "source": "import sys\nsys.exit(0)\n",
                                                      "schedule": {}, "seed": 0}))
    return tmp_path


G = "numpy.py"  # a copy of the GEMM example named like a module it must not shadow
BATTERY: list[tuple[str, int, str]] = [  # argv, exit status, a part of the message
    # user files that cannot be loaded
    ("check raises.py", 2, "raised ZeroDivisionError"),
    ("check bad.py", 2, "does not parse"),
    ("check binary.py", 2, "does not parse"),
    ("check exits.py", 2, "sys.exit(0)"),
    ("check exits3.py", 2, "sys.exit(3)"),
    ("check imports.py", 2, "failed to import"),
    ("check lookup.py", 2, "raised KeyError"),
    ("check kernel_raises.py", 2, "raised ValueError: boom"),
    ("check library_raises.py", 2, "raised ValueError: negative dimensions"),
    ("check dsl.py", 2, "does not match box extent"),
    ("check empty.py", 2, "defines no kernel or schedule"),
    ("ir empty.py", 2, "defines no kernel"),
    ("emit empty.py", 2, "defines no kernel"),
    ("diff empty.py", 2, "defines no kernel"),
    ("check notpy.txt", 2, "is not a .py file"),
    ("check folder.py", 2, "no such file"),
    ("check missing.py", 2, "no such file"),
    ("diff missing.json", 2, "no such file"),
    ("diff notpy.txt", 2, "is not a .py file"),
    ("diff notcase.json", 2, "not a fuzz case file"),
    ("diff broken.json", 2, "not JSON"),
    ("diff binary.json", 2, "fuzz case file"),
    ("diff source.json", 2, "carries Python source"),
    (f"ir {G} --kernel nope", 2, "no kernel 'nope'"),
    (f"check {G} --kernel nope", 2, "no kernel or schedule 'nope'"),
    # sizes
    (f"emit {G} --size N=x", 2, "--size"),
    (f"emit {G} --size N=²", 2, "--size"),
    (f"emit {G} --size N=-1", 2, "--size"),
    (f"emit {G} --size N=1e3", 2, "--size"),
    (f"emit {G} --size N=", 2, "--size"),
    (f"emit {G} --size =3", 2, "--size"),
    (f"emit {G} --size N=8.5", 2, "--size"),
    (f"emit {G} --size N=99999999999999999999", 2, "--size"),
    (f"emit {G} --size N=9223372036854775808", 2, "--size"),
    (f"emit {G} --size Q=3", 2, "unknown size or config 'Q'"),
    (f"emit {G} --size k=3", 2, "unknown size or config 'k'"),
    (f"emit {G} --size kernel=3", 2, "unknown size or config 'kernel'"),
    (f"check {G} --size M", 2, "--size"),
    # counts and seeds
    (f"diff {G} --seed -1", 2, "--seed"),
    (f"diff {G} --seed x", 2, "--seed"),
    (f"diff {G} --trials 0", 2, "--trials"),
    (f"diff {G} --trials -1", 2, "--trials"),
    (f"diff {G} --trials 1.5", 2, "--trials"),
    (f"diff {G} --trials ٣", 2, "--trials"),
    ("fuzz --cases 0", 2, "--cases"),
    ("fuzz --cases -5", 2, "--cases"),
    ("fuzz --cases x", 2, "--cases"),
    ("fuzz --max-ops -1", 2, "--max-ops"),
    ("fuzz --seed -1", 2, "--seed"),
    ("fuzz --trials 0", 2, "--trials"),
    (f"check {G} --timeout-ms 0", 2, "--timeout-ms"),
    ("demo --n 0", 2, "--n"),
    ("demo --n 1", 2, "--n"),
    ("demo --n 3", 2, "--n"),
    ("demo --n 100000", 2, "--n"),
    ("demo --n x", 2, "--n"),
    ("demo --seed -1", 2, "--seed"),
    ("gpu-suite out --seed -1", 2, "--seed"),
    # targets
    (f"emit {G} --target bogus", 2, "invalid choice: 'bogus'"),
    (f"diff {G} --target opencl", 2, "invalid choice: 'opencl'"),
    ("fuzz --target bogus", 2, "invalid choice: 'bogus'"),
    ("diff half.py --target cuda-host --trials 1", 2, "unsupported by target cuda-host"),
    ("emit half.py --target cuda", 2, "unsupported by target cuda"),
    # folders
    ("gpu-suite afile", 2, "is a file, not a folder"),
    ("gpu-suite afile/sub", 2, "not a writable folder"),
    ("fuzz --out afile --cases 1", 2, "is a file, not a folder"),
    ("gpu-suite out --case nope", 2, "no gpu-suite case nope"),
    # argparse's own usage errors
    ("", 2, "required: cmd"),
    ("bogus", 2, "invalid choice: 'bogus'"),
    ("check", 2, "required: file"),
    (f"check {G} --bogus", 2, "unrecognized arguments: --bogus"),
    ("demo --n", 2, "expected one argument"),
    # a disproved check is exit 1 and no error line
    ("check racy.py --size N=8", 1, ""),
]


def run_in_process(argv: str, capsys) -> tuple[int, str, str]:
    status = main(argv.split())
    out = capsys.readouterr()
    return status, out.out, out.err


def check_rendered(err: str, cwd: Path, expected: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 2, err
    m = ERROR.match(lines[0])
    assert m, lines[0]
    assert lines[1].startswith("hint: ") and len(lines[1]) > len("hint: "), lines[1]
    assert expected in m["message"], (expected, lines[0])
    where = m["file"]
    assert where == "<command line>" or (cwd / where).resolve().is_relative_to(cwd.resolve()), where


@pytest.mark.parametrize("argv,status,expected", BATTERY, ids=[b[0] or "(empty)" for b in BATTERY])
def test_a_bad_command_line_is_one_typed_line(files, capsys, monkeypatch, argv, status, expected):
    monkeypatch.chdir(files)
    got, out, err = run_in_process(argv, capsys)
    assert got == status, (out, err)
    assert "Traceback" not in out + err
    if status == 2:
        check_rendered(err, files, expected)
    else:
        assert err == "" and "NOT OK" in out


def test_user_files_named_like_modules_shadow_nothing(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    before = (sys.modules["numpy"], sys.modules["tilecert"], list(sys.path))
    for name in ("numpy.py", "tilecert.py"):
        assert main(["ir", name]) == 0
        assert "kernel gemm" in capsys.readouterr().out
    assert (sys.modules["numpy"], sys.modules["tilecert"], list(sys.path)) == before


def test_traceback_is_printed_only_when_asked(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    assert main(["check", "raises.py", "--traceback"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ZeroDivisionError" in err
    assert err.splitlines()[-2].startswith("error: raises.py:2: ")


def test_an_error_type_with_an_exit_status_flows_through_the_renderer(capsys):
    from tilecert.cli import report_error
    from tilecert.semantics.errors import Loc, TilecertError

    class Verdict(TilecertError):
        exit_status = 1

    assert report_error(Verdict("not proved", Loc("k.py", 3), "prove it"), "k.py", set(), False) == 1
    assert capsys.readouterr().err.splitlines() == ["error: k.py:3: not proved", "hint: prove it"]


def test_an_unsupported_case_is_not_a_failure_of_the_campaign(tmp_path):
    from hypothesis import strategies as st

    from tilecert.backends.cuda.errors import CudaUnsupported
    from tilecert.backends.fuzz import FuzzCase, campaign

    def refuse(case):
        raise CudaUnsupported("kernel uses f16", "use f32")

    seen = []
    campaign(st.just(FuzzCase("{}", "{}", 0, "k")), 2, 0, refuse, tmp_path / "out",
             lambda n, case, report, path: seen.append((report, path)))
    assert [r.trials[0].outcome for r, _ in seen] == ["unsupported"] * len(seen) and seen
    assert not any(r.failed for r, _ in seen) and not (tmp_path / "out").exists()


SUBPROCESS = [("check raises.py", "raised ZeroDivisionError"), ("check exits.py", "sys.exit(0)"),
              ("fuzz --cases 0", "--cases"), ("diff source.json", "carries Python source"),
              ("check numpy.py --size N=x", "--size")]


@pytest.mark.parametrize("argv,expected", SUBPROCESS)
def test_the_installed_command_prints_no_traceback(files, argv, expected):
    script = Path(sys.executable).with_name("tilecert")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "tilecert.cli"]
    done = subprocess.run(command + argv.split(), cwd=files, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    check_rendered(done.stderr, files, expected)
    assert str(script) not in done.stderr and "bin/tilecert" not in done.stderr


def test_a_user_file_that_exits_zero_is_no_pass(tmp_path, capsys):
    f = tmp_path / "quits.py"
    f.write_text("import sys\nimport tilecert as tc\nfrom tilecert import i32\n\n@tc.kernel\n"
                 "def k(X: tc.Tensor[i32, 'N']):\n    pass\n\nsys.exit(0)\n")
    assert main(["check", str(f)]) == 2
    assert "exit(0)" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--size", "N=8", "--size", "N=9"], ["--kernel", ""]])
def test_conflicting_sizes_and_empty_kernel_names_are_usage_errors(argv, capsys):
    assert main(["emit", str(HERE.parent / "examples" / "elementwise.py")] + argv) == 2
    assert capsys.readouterr().err.startswith("error: ")
