"""Whether a new statement instance performs the operation of an old one: cells and values agree.

``agree(old, new, xo, xn)`` is a formula over the coordinates of an old instance ``xo`` and
a new one ``xn``; it holds where the two perform the same operation:

- allocations: same dtype, scope and rank, equal shapes;
- stores and updates: corresponding target buffers, equal indices, the same reducer and
  policy, and agreeing values;
- values, recursively: loads of corresponding buffers at equal indices, equal literals,
  index values that are equal (conditions: equivalent), the same operator on agreeing
  operands. A select on an index condition agrees with a select whose condition is
  equivalent and whose taken branch agrees (``(c and c' and a ~ a') or (not c and not c'
  and b ~ b')``), or, when one side was folded (by the simplifier), with the branch the
  condition selects (``(c and a ~ e) or (not c and b ~ e)``). A select on a data value
  agrees only with a select whose condition and branches all agree.

A structural mismatch gives the constant false. Buffers correspond through ``buffer_of``
(tensors by name, declared buffers through the matching of their declarations).
"""
from __future__ import annotations

from typing import Callable, Optional

from tilecert.semantics import loopir as L
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import IExpr

from .formula import FALSE, TRUE, Env, Formula, cmp, cond_of, conj, disj, equal_all, is_condition, negate, term_of
from .model import BufferRec, Stmt

BufferOf = Callable[[BufferRec], Optional[BufferRec]]  # new buffer -> the old buffer it stands for


def agree(old: Stmt, new: Stmt, eo: Env, en: Env, buffer_of: BufferOf) -> Formula:
    """Where old statement ``old`` (coordinates under ``eo``) and ``new`` (under ``en``) do the same."""
    o, n = old.node, new.node
    if type(o) is not type(n):
        return FALSE
    if isinstance(o, L.Decl):
        if (o.buf.dtype, o.buf.scope, len(o.buf.shape)) != (n.buf.dtype, n.buf.scope, len(n.buf.shape)):
            return FALSE
        return equal_all([term_of(e, eo) for e in o.buf.shape], [term_of(e, en) for e in n.buf.shape])
    if isinstance(o, L.Accum) and (o.op, o.policy) != (n.op, n.policy):
        return FALSE
    if new.target is None or old.target is None or buffer_of(new.target) is not old.target \
            or len(o.index) != len(n.index):
        return FALSE
    index = equal_all([term_of(e, eo) for e in o.index], [term_of(e, en) for e in n.index])
    if index == FALSE:
        return FALSE
    return conj(index, agree_value(o.value, n.value, old, new, eo, en, buffer_of))


def agree_value(a: L.SExpr, b: L.SExpr, old: Stmt, new: Stmt, eo: Env, en: Env, buffer_of: BufferOf) -> Formula:
    """Where value ``a`` (old) and ``b`` (new) are equal."""
    def rec(x: L.SExpr, y: L.SExpr) -> Formula:
        return agree_value(x, y, old, new, eo, en, buffer_of)

    a_sel = isinstance(a, L.Sel) and isinstance(a.cond, L.Ix)
    b_sel = isinstance(b, L.Sel) and isinstance(b.cond, L.Ix)
    if a_sel and b_sel and a.dtype == b.dtype:
        ca, cb = cond_of(a.cond.expr, eo), cond_of(b.cond.expr, en)
        both = disj(conj(ca, cb, rec(a.a, b.a)), conj(negate(ca), negate(cb), rec(a.b, b.b)))
        if both != FALSE:
            return both
    if a_sel:
        ca = cond_of(a.cond.expr, eo)
        return disj(conj(ca, rec(a.a, b)), conj(negate(ca), rec(a.b, b)))
    if b_sel:
        cb = cond_of(b.cond.expr, en)
        return disj(conj(cb, rec(a, b.a)), conj(negate(cb), rec(a, b.b)))
    if type(a) is not type(b) or getattr(a, "dtype", None) != getattr(b, "dtype", None):
        return FALSE
    if isinstance(a, L.Ld):
        old_buf = _buffer(old, a.buf)
        new_buf = _buffer(new, b.buf)
        if old_buf is None or new_buf is None or buffer_of(new_buf) is not old_buf or len(a.index) != len(b.index):
            return FALSE
        return equal_all([term_of(e, eo) for e in a.index], [term_of(e, en) for e in b.index])
    if isinstance(a, L.Lit):
        return TRUE if literal_key(a) == literal_key(b) else FALSE
    if isinstance(a, L.Ix):
        return _same_index_value(a.expr, b.expr, eo, en)
    if isinstance(a, (L.Un, L.Cvt)):
        return rec(a.x, b.x) if getattr(a, "fn", None) == getattr(b, "fn", None) else FALSE
    if isinstance(a, L.Bin):
        return conj(rec(a.a, b.a), rec(a.b, b.b)) if a.fn == b.fn else FALSE
    if isinstance(a, L.Sel):  # on a data-dependent condition: every part must agree
        return conj(rec(a.cond, b.cond), rec(a.a, b.a), rec(a.b, b.b))
    return FALSE


def literal_key(lit: L.Lit) -> tuple:
    """What a literal denotes: its dtype and value (``0`` and ``0.0`` of one float dtype are one value,
    ``-0.0`` another; a NaN equals a NaN)."""
    dt = dtype_of(lit.dtype)
    if dt.is_float:
        return lit.dtype, repr(float(lit.value))
    return lit.dtype, bool(lit.value) if dt.is_bool else int(lit.value)


def _same_index_value(a: IExpr, b: IExpr, eo: Env, en: Env) -> Formula:
    if is_condition(a) or is_condition(b):
        ca, cb = cond_of(a, eo), cond_of(b, en)
        return disj(conj(ca, cb), conj(negate(ca), negate(cb)))
    return cmp("eq", term_of(a, eo), term_of(b, en))


def _buffer(s: Stmt, name: str) -> Optional[BufferRec]:
    """The buffer a load of ``name`` in statement ``s`` reads (resolved when the model was built)."""
    for acc in s.accesses:
        if acc.mode == "read" and acc.buffer.name == name:
            return acc.buffer
    return None
