"""The package works installed, not only from an editable checkout: a non-editable install (``pip install
--no-deps --target``) run from outside the repository imports tilecert from the install, and ``tilecert demo``
and ``tilecert check`` of the packaged examples (``tilecert.examples``) work there."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return target


def _run(installed, *args):
    env = {**os.environ, "PYTHONPATH": str(installed)}
    return subprocess.run([sys.executable, *args], cwd=installed.parent, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_the_install_is_imported_with_its_examples(installed):
    done = _run(installed, "-c", "import tilecert, tilecert.examples as e; print(tilecert.__file__); "
                                 "print(e.source_path('gemm')); print(len(e.EXAMPLES))")
    assert done.returncode == 0, done.stderr
    module, gemm, count = done.stdout.split()
    assert module.startswith(str(installed)) and gemm == str(installed / "tilecert" / "examples" / "gemm.py")
    assert int(count) >= 10


@pytest.mark.slow
def test_demo_and_check_run_from_the_install(installed):
    demo = _run(installed, "-m", "tilecert.cli", "demo", "--n", "8")
    assert demo.returncode == 0 and "ALL GOOD" in demo.stdout, demo.stdout[-2000:] + demo.stderr
    examples = installed / "tilecert" / "examples"
    proved = _run(installed, "-m", "tilecert.cli", "check", str(examples / "gemm.py"))
    assert proved.returncode == 0 and proved.stdout.rstrip().endswith(": OK"), proved.stdout[-2000:]
    disproved = _run(installed, "-m", "tilecert.cli", "check", str(examples / "shift.py"))
    assert disproved.returncode == 1 and "dependence: DISPROVED" in disproved.stdout, disproved.stderr


@pytest.mark.slow
def test_an_error_in_an_installed_example_names_its_line(installed):
    """An example kernel is the user's code even where it is installed inside the tilecert package: its
    capture error is located at its own line, as it is in the checkout."""
    bad = installed / "tilecert" / "examples" / "bad.py"
    line = next(n for n, text in enumerate(bad.read_text().splitlines(), 1) if "acc = acc +" in text or "acc +=" in text)
    done = _run(installed, "-m", "tilecert.cli", "check", str(bad))
    assert done.returncode == 2 and f"error: {bad}:{line}: parallel nests cannot mutate" in done.stderr, done.stderr
