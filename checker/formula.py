"""Formulas over integer variables: the one language every checker query is written in.

Terms are integer expressions (variables, constants, ``+ - *``, floor division, modulo,
``min``, ``max``, if-then-else); formulas are comparisons combined with ``and``, ``or`` and
``exists``. There is no negation node: ``negate`` pushes a negation down to the comparisons
of a quantifier-free formula, and a query that needs the negation of an existential states
it as ``pos - neg`` (see ``solve``). The same formula is rendered as isl text when it is
quasi-affine (``isl_solve``), as a z3 term otherwise (``z3_solve``), and evaluated on
concrete integers to validate every witness a solver returns.

Index expressions of the IR (``semantics.index``) convert with ``term_of`` / ``cond_of``
under an ``Env`` that names each loop variable and substitutes the bound sizes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from tilecert.semantics.index import IBin, IConst, IExpr, INot, ISize, IVar
from tilecert.semantics.solver_names import solver_name

from .errors import CheckerError


@dataclass(frozen=True)
class Var:
    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const:
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Arith:
    """``a op b`` with ``op`` one of add, sub, mul, floordiv, mod, min, max (Python semantics)."""

    op: str
    a: "Term"
    b: "Term"

    def __str__(self) -> str:
        if self.op in ("min", "max"):
            return f"{self.op}({self.a}, {self.b})"
        return f"({self.a} {_ARITH_SYMBOL[self.op]} {self.b})"


@dataclass(frozen=True)
class Ite:
    """``a`` where ``cond`` holds, else ``b`` (a boolean used as a number is ``Ite(c, 1, 0)``)."""

    cond: "Formula"
    a: "Term"
    b: "Term"

    def __str__(self) -> str:
        return f"({self.cond} ? {self.a} : {self.b})"


Term = Union[Var, Const, Arith, Ite]


@dataclass(frozen=True)
class Cmp:
    """``a op b`` with ``op`` one of lt, le, eq, ne."""

    op: str
    a: Term
    b: Term

    def __str__(self) -> str:
        return f"{self.a} {_CMP_SYMBOL[self.op]} {self.b}"


@dataclass(frozen=True)
class And:
    parts: tuple["Formula", ...]

    def __str__(self) -> str:
        return "true" if not self.parts else "(" + " and ".join(map(str, self.parts)) + ")"


@dataclass(frozen=True)
class Or:
    parts: tuple["Formula", ...]

    def __str__(self) -> str:
        return "false" if not self.parts else "(" + " or ".join(map(str, self.parts)) + ")"


@dataclass(frozen=True)
class Exists:
    names: tuple[str, ...]
    body: "Formula"

    def __str__(self) -> str:
        return f"(exists {', '.join(self.names)}: {self.body})"


Formula = Union[Cmp, And, Or, Exists]
TRUE: Formula = And(())
FALSE: Formula = Or(())

_ARITH_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}
_CMP_SYMBOL = {"lt": "<", "le": "<=", "eq": "=", "ne": "!="}
_ARITH = ("add", "sub", "mul", "floordiv", "mod", "min", "max")


# ----------------------------------------------------------------------------- construction
def arith(op: str, a: Term, b: Term) -> Term:
    """``a op b``, folding constants and neutral elements."""
    if isinstance(a, Const) and isinstance(b, Const) and not (op in ("floordiv", "mod") and b.value == 0):
        return Const(_apply(op, a.value, b.value))
    if op == "add" and a == Const(0):
        return b
    if op in ("add", "sub") and b == Const(0):
        return a
    if op == "mul" and (a == Const(1) or b == Const(1)):
        return b if a == Const(1) else a
    if op == "mul" and Const(0) in (a, b):
        return Const(0)
    if op == "floordiv" and b == Const(1):
        return a
    return Arith(op, a, b)


def cmp(op: str, a: Term, b: Term) -> Formula:
    """``a op b`` for op in lt, le, gt, ge, eq, ne (gt / ge are stored swapped), constants folded."""
    if op in ("gt", "ge"):
        op, a, b = {"gt": "lt", "ge": "le"}[op], b, a
    if isinstance(a, Const) and isinstance(b, Const):
        return TRUE if _compare(op, a.value, b.value) else FALSE
    if a == b:
        return TRUE if op in ("le", "eq") else FALSE
    return Cmp(op, a, b)


def conj(*parts: Formula) -> Formula:
    out: list[Formula] = []
    for p in parts:
        if p == FALSE:
            return FALSE
        out.extend(p.parts if isinstance(p, And) else (p,))
    return out[0] if len(out) == 1 else And(tuple(out))


def disj(*parts: Formula) -> Formula:
    out: list[Formula] = []
    for p in parts:
        if p == TRUE:
            return TRUE
        out.extend(p.parts if isinstance(p, Or) else (p,))
    return out[0] if len(out) == 1 else Or(tuple(out))


def exists(names: tuple[str, ...] | list[str], body: Formula) -> Formula:
    """``exists names: body`` (only the names ``body`` mentions are kept)."""
    used = variables(body)
    kept = tuple(n for n in names if n in used)
    if not kept or body in (TRUE, FALSE):
        return body
    return Exists(kept, body)


def equal_all(xs: list[Term], ys: list[Term]) -> Formula:
    return conj(*(cmp("eq", x, y) for x, y in zip(xs, ys)))


def differ(xs: list[Term], ys: list[Term]) -> Formula:
    """Some component of ``xs`` differs from the one of ``ys``."""
    return disj(*(cmp("ne", x, y) for x, y in zip(xs, ys)))


def negate(f: Formula) -> Formula:
    """The negation of a quantifier-free formula, pushed down to its comparisons."""
    if isinstance(f, Cmp):
        return {"lt": lambda: cmp("le", f.b, f.a), "le": lambda: cmp("lt", f.b, f.a),
                "eq": lambda: cmp("ne", f.a, f.b), "ne": lambda: cmp("eq", f.a, f.b)}[f.op]()
    if isinstance(f, And):
        return disj(*(negate(p) for p in f.parts))
    if isinstance(f, Or):
        return conj(*(negate(p) for p in f.parts))
    raise CheckerError("negate: an existential formula has no quantifier-free negation",
                       hint="state the query as pos - neg (solve.Case) instead")


# ----------------------------------------------------------------------------- from index expressions
@dataclass(frozen=True)
class Env:
    """How index expressions become terms: loop variable ``v`` is the term ``coords[v]`` (a
    variable, or an expression over another instance's variables); a size bound in ``sizes``
    is a constant, any other size ``n`` the variable ``size_var(n)``."""

    coords: Mapping[int, "Term"]
    sizes: Mapping[str, int] = field(default_factory=dict)


def size_var(name: str) -> str:
    """The variable of a free size: the reserved solver namespace (``semantics.solver_names``)."""
    return solver_name(name)


def term_of(e: IExpr, env: Env) -> Term:
    if isinstance(e, IConst):
        return Const(int(e.value))
    if isinstance(e, ISize):
        return Const(int(env.sizes[e.name])) if e.name in env.sizes else Var(size_var(e.name))
    if isinstance(e, IVar):
        if e.region not in env.coords:
            raise CheckerError(f"loop variable {e} is not in scope here", hint="the program reads a loop variable "
                               "outside the loop that binds it")
        return env.coords[e.region]
    if isinstance(e, IBin) and e.op in _ARITH:
        return arith(e.op, term_of(e.a, env), term_of(e.b, env))
    return Ite(cond_of(e, env), Const(1), Const(0))


def cond_of(e: IExpr, env: Env) -> Formula:
    """The formula ``e != 0`` (comparisons and logic map to themselves)."""
    if isinstance(e, IConst):
        return TRUE if e.value else FALSE
    if isinstance(e, INot):
        return negate(cond_of(e.a, env))
    if isinstance(e, IBin) and e.op in ("and", "or"):
        return (conj if e.op == "and" else disj)(cond_of(e.a, env), cond_of(e.b, env))
    if isinstance(e, IBin) and e.op in ("lt", "le", "gt", "ge", "eq", "ne"):
        return cmp(e.op, term_of(e.a, env), term_of(e.b, env))
    return cmp("ne", term_of(e, env), Const(0))


def is_condition(e: IExpr) -> bool:
    """Whether ``e`` is boolean-valued (a comparison, a logical combination, a negation)."""
    return isinstance(e, INot) or (isinstance(e, IBin) and e.op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or"))


# ----------------------------------------------------------------------------- inspection and evaluation
def variables(x: Union[Term, Formula]) -> frozenset[str]:
    """The free variables of a term or formula."""
    if isinstance(x, Var):
        return frozenset({x.name})
    if isinstance(x, Const):
        return frozenset()
    if isinstance(x, (Arith, Cmp)):
        return variables(x.a) | variables(x.b)
    if isinstance(x, Ite):
        return variables(x.cond) | variables(x.a) | variables(x.b)
    if isinstance(x, (And, Or)):
        out: frozenset[str] = frozenset()
        for p in x.parts:
            out |= variables(p)
        return out
    if isinstance(x, Exists):
        return variables(x.body) - set(x.names)
    raise TypeError(type(x).__name__)


def substitute(x: Union[Term, Formula], values: Mapping[str, int]) -> Union[Term, Formula]:
    """``x`` with each variable of ``values`` replaced by its constant (refolded)."""
    if isinstance(x, Var):
        return Const(int(values[x.name])) if x.name in values else x
    if isinstance(x, Const):
        return x
    if isinstance(x, Arith):
        return arith(x.op, substitute(x.a, values), substitute(x.b, values))
    if isinstance(x, Ite):
        c = substitute(x.cond, values)
        if c in (TRUE, FALSE):
            return substitute(x.a if c == TRUE else x.b, values)
        return Ite(c, substitute(x.a, values), substitute(x.b, values))
    if isinstance(x, Cmp):
        return cmp(x.op, substitute(x.a, values), substitute(x.b, values))
    if isinstance(x, And):
        return conj(*(substitute(p, values) for p in x.parts))
    if isinstance(x, Or):
        return disj(*(substitute(p, values) for p in x.parts))
    if isinstance(x, Exists):
        inner = {k: v for k, v in values.items() if k not in x.names}
        return exists(x.names, substitute(x.body, inner))
    raise TypeError(type(x).__name__)


def value(t: Term, values: Mapping[str, int]) -> Optional[int]:
    """The value of ``t`` (None where it divides by zero)."""
    if isinstance(t, Var):
        return int(values[t.name])
    if isinstance(t, Const):
        return t.value
    if isinstance(t, Ite):
        c = holds(t.cond, values)
        return value(t.a if c else t.b, values)
    a, b = value(t.a, values), value(t.b, values)
    if a is None or b is None or (t.op in ("floordiv", "mod") and b == 0):
        return None
    return _apply(t.op, a, b)


def holds(f: Formula, values: Mapping[str, int]) -> bool:
    """Whether a quantifier-free formula holds at ``values`` (a division by zero makes an atom false)."""
    if isinstance(f, Cmp):
        a, b = value(f.a, values), value(f.b, values)
        return a is not None and b is not None and _compare(f.op, a, b)
    if isinstance(f, And):
        return all(holds(p, values) for p in f.parts)
    if isinstance(f, Or):
        return any(holds(p, values) for p in f.parts)
    raise CheckerError("holds: an existential formula needs a solver", hint="use solve.decide_closed")


def divisors(x: Union[Term, Formula]) -> list[Term]:
    """The divisors of every division and modulo in ``x`` that are not constants."""
    if isinstance(x, (Var, Const)):
        return []
    if isinstance(x, Arith):
        own = [x.b] if x.op in ("floordiv", "mod") and not isinstance(x.b, Const) else []
        return own + divisors(x.a) + divisors(x.b)
    if isinstance(x, (Cmp,)):
        return divisors(x.a) + divisors(x.b)
    if isinstance(x, Ite):
        return divisors(x.cond) + divisors(x.a) + divisors(x.b)
    if isinstance(x, (And, Or)):
        return [d for p in x.parts for d in divisors(p)]
    if isinstance(x, Exists):
        return divisors(x.body)
    raise TypeError(type(x).__name__)


def _apply(op: str, a: int, b: int) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "floordiv":
        return a // b
    if op == "mod":
        return a % b
    return min(a, b) if op == "min" else max(a, b)


def _compare(op: str, a: int, b: int) -> bool:
    return {"lt": a < b, "le": a <= b, "eq": a == b, "ne": a != b}[op]
