"""Every lemma script of ``proofs/`` runs and proves its lemma; a false claim is reported FAILED."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import z3

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p for p in (ROOT / "proofs").glob("*.py") if p.name != "lemma.py")
sys.path.insert(0, str(ROOT / "proofs"))

from lemma import Lemma  # noqa: E402


def test_every_structural_op_has_a_lemma():
    names = {p.stem for p in SCRIPTS}
    assert {"split", "fuse", "reorder", "tile", "partition", "pad", "unit", "simplifier"} <= names


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_lemma_script_proves_its_lemma(script):
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"lemma {script.stem}:")  # the lemma in words
    assert lines[-1] == f"PROVED: {script.stem}"
    assert not any("FAILED" in line for line in lines)


def test_a_false_claim_fails(capsys):
    lem = Lemma("false", "a claim that does not hold")
    x = z3.Int("x")
    assert not lem.valid("square is below 10", "x * x < 10", x * x < 10)
    assert not lem.isl_empty("nonempty", "{ [i] : 0 <= i < 2 } = ∅", "{ [i] : 0 <= i < 2 }")
    assert lem.finish() == 1
    out = capsys.readouterr().out
    assert "FAILED square is below 10" in out and "counterexample" in out and out.strip().endswith("FAILED: false")


def test_a_timeout_is_not_a_proof():
    lem = Lemma("hard", "z3 gives up")
    a, b, c = z3.Ints("a b c")
    # an instance of Fermat's last theorem for n = 3: true, but beyond z3 in 1 ms
    ok = lem.valid("no cubes", "a^3 + b^3 != c^3 for positive a, b, c", a * a * a + b * b * b != c * c * c,
                   [a > 0, b > 0, c > 0], timeout_ms=1)
    assert not ok and "unknown" in lem.results[0][3]
