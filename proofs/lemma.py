"""Scaffolding shared by the lemma scripts of ``proofs/``.

A ``Lemma`` states what it proves in words, then discharges claims one by one:

- ``valid``: a z3 formula holds for every integer value of its variables (its negation,
  together with the hypotheses, is unsatisfiable); quantified claims are fine, and an
  answer of ``unknown`` (a timeout) is a failure, never a proof;
- ``isl_equal`` / ``isl_empty``: sets written in isl syntax, with symbolic parameters, are
  equal / empty (Presburger arithmetic: decided exactly, for every parameter value).

``finish`` prints one ``PROVED`` or ``FAILED`` line per claim and returns the exit status
(0 only when every claim is proved). Scripts run as ``python proofs/<name>.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import islpy as isl
import z3

TIMEOUT_MS = 60000


@dataclass
class Lemma:
    name: str
    statement: str
    results: list[tuple[str, str, bool, str]] = field(default_factory=list)

    def valid(self, claim: str, formula: str, conclusion: z3.BoolRef,
              hypotheses: Sequence[z3.BoolRef] = (), timeout_ms: int = TIMEOUT_MS) -> bool:
        """``hypotheses => conclusion`` for all integer values of the free variables (z3)."""
        solver = z3.Solver()
        solver.set("timeout", timeout_ms)
        solver.add(*hypotheses)
        solver.add(z3.Not(conclusion))
        answer = solver.check()
        if answer == z3.unsat:
            detail = "z3: the negation is unsatisfiable"
        elif answer == z3.sat:
            detail = f"z3: counterexample {solver.model()}"
        else:
            detail = f"z3: unknown ({solver.reason_unknown()})"
        return self._record(claim, formula, answer == z3.unsat, detail)

    def isl_equal(self, claim: str, formula: str, left: str, right: str) -> bool:
        a, b = isl.Set(left), isl.Set(right)
        ok = a.is_equal(b)
        detail = "isl: the sets are equal" if ok else \
            f"isl: they differ, e.g. at {a.subtract(b).union(b.subtract(a)).sample_point()}"
        return self._record(claim, formula, ok, detail)

    def isl_empty(self, claim: str, formula: str, text: str) -> bool:
        s = isl.Set(text)
        ok = s.is_empty()
        return self._record(claim, formula, ok, "isl: the set of counterexamples is empty" if ok
                            else f"isl: counterexample {s.sample_point()}")

    def _record(self, claim: str, formula: str, ok: bool, detail: str) -> bool:
        self.results.append((claim, formula, ok, detail))
        return ok

    def finish(self) -> int:
        print(f"lemma {self.name}: {self.statement}")
        for claim, formula, ok, detail in self.results:
            print(f"  {'PROVED' if ok else 'FAILED'} {claim}")
            print(f"      {formula}")
            print(f"      ({detail})")
        ok = bool(self.results) and all(r[2] for r in self.results)
        print(f"{'PROVED' if ok else 'FAILED'}: {self.name}")
        return 0 if ok else 1


def lex_lt(xs: Sequence[z3.ArithRef], ys: Sequence[z3.ArithRef]) -> z3.BoolRef:
    """``xs`` before ``ys`` in lexicographic order."""
    parts = []
    for k in range(len(xs)):
        parts.append(z3.And(*[xs[j] == ys[j] for j in range(k)], xs[k] < ys[k]))
    return z3.Or(*parts)
