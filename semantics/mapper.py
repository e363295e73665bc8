"""Generic rewriting of loop-form nodes: one mapper base class and the functions built on it.

``Mapper`` has one method per node kind of ``loopir`` (statements, blocks, buffers, scalar
expressions) and one for a whole index expression (``map_iexpr``). Each default method maps
the node's children and rebuilds the node only when a child changed: a node none of whose
children changed is returned as the same object, since datamaps name statements by identity.
A subclass overrides the methods of the kinds it rewrites and calls ``super()`` for the rest.

A statement method returns a statement, ``None`` (the statement is left out) or a list of
statements (spliced into the enclosing block in its place).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Union

from . import ir
from . import loopir as L
from .index import IExpr, substitute

Mapped = Union[Any, None, list]  # what a statement method returns (see the module doc)


class Mapper:
    """The identity rewrite of loop-form nodes (Exo's ``LoopIR_Rewrite``, Loopy's ``IdentityMapper``)."""

    def rebuilt(self, node: Any, **fields: Any) -> Any:
        """``node`` with ``fields`` replaced; ``node`` itself when each new field is the old object."""
        if all(getattr(node, name) is value for name, value in fields.items()):
            return node
        return dataclasses.replace(node, **fields)

    def map(self, node: Any) -> Any:
        """Map any loop-form node: a block, statement, buffer, scalar or index expression, or a tuple of them."""
        if isinstance(node, IExpr):
            return self.map_iexpr(node)
        if isinstance(node, tuple):
            return self.map_tuple(node, self.map)
        if isinstance(node, ir.Block):
            return self.map_block(node)
        if isinstance(node, L.STMT_TYPES):
            return self.map_stmt(node)
        if isinstance(node, L.EXPR_TYPES):
            return self.map_sexpr(node)
        if isinstance(node, L.Buffer):
            return self.map_buffer(node)
        return node

    def map_tuple(self, items: tuple, each: Callable[[Any], Any]) -> tuple:
        """``items`` mapped by ``each``; ``items`` itself when nothing changed."""
        new = tuple(each(x) for x in items)
        return items if all(a is b for a, b in zip(new, items)) else new

    # ------------------------------------------------------------------------- index expressions
    def map_iexpr(self, e: IExpr) -> IExpr:
        """A whole index expression (extents, starts, guards, indices, shapes); the default keeps it."""
        return e

    def map_index(self, index: tuple[IExpr, ...]) -> tuple[IExpr, ...]:
        return self.map_tuple(index, self.map_iexpr)

    # ------------------------------------------------------------------------- blocks and statements
    def map_block(self, b: ir.Block) -> ir.Block:
        """``b`` with each statement mapped (left out on ``None``, spliced on a list)."""
        ops: list = []
        for st in b.ops:
            new = self.map_stmt(st)
            if isinstance(new, list):
                ops.extend(new)
            elif new is not None:
                ops.append(new)
        if len(ops) == len(b.ops) and all(a is c for a, c in zip(ops, b.ops)):
            return b
        return self.rebuilt(b, ops=tuple(ops))

    def map_stmt(self, st: Any) -> Mapped:
        """Dispatch on the statement kind."""
        return self._dispatch(st)

    def map_loop(self, st: L.Loop) -> Mapped:
        return self.rebuilt(st, extent=self.map_iexpr(st.extent), start=self.map_iexpr(st.start),
                            body=self.map_block(st.body))

    def map_if(self, st: L.If) -> Mapped:
        return self.rebuilt(st, cond=self.map_iexpr(st.cond), body=self.map_block(st.body))

    def map_decl(self, st: L.Decl) -> Mapped:
        return self.rebuilt(st, buf=self.map_buffer(st.buf))

    def map_assign(self, st: L.Assign) -> Mapped:
        return self.rebuilt(st, index=self.map_index(st.index), value=self.map_sexpr(st.value))

    def map_accum(self, st: L.Accum) -> Mapped:
        return self.rebuilt(st, index=self.map_index(st.index), value=self.map_sexpr(st.value))

    def map_barrier(self, st: L.Barrier) -> Mapped:
        return self.rebuilt(st)

    def map_buffer(self, buf: L.Buffer) -> L.Buffer:
        return self.rebuilt(buf, shape=self.map_index(buf.shape))

    # ------------------------------------------------------------------------- scalar expressions
    def map_sexpr(self, e: L.SExpr) -> L.SExpr:
        """Dispatch on the scalar expression kind."""
        return self._dispatch(e)

    def _dispatch(self, node: Any) -> Any:
        method = _METHODS.get(type(node))
        return getattr(self, method)(node) if method else node

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return self.rebuilt(e, index=self.map_index(e.index))

    def map_lit(self, e: L.Lit) -> L.SExpr:
        return self.rebuilt(e)

    def map_ix(self, e: L.Ix) -> L.SExpr:
        return self.rebuilt(e, expr=self.map_iexpr(e.expr))

    def map_un(self, e: L.Un) -> L.SExpr:
        return self.rebuilt(e, x=self.map_sexpr(e.x))

    def map_cvt(self, e: L.Cvt) -> L.SExpr:
        return self.rebuilt(e, x=self.map_sexpr(e.x))

    def map_bin(self, e: L.Bin) -> L.SExpr:
        return self.rebuilt(e, a=self.map_sexpr(e.a), b=self.map_sexpr(e.b))

    def map_sel(self, e: L.Sel) -> L.SExpr:
        return self.rebuilt(e, cond=self.map_sexpr(e.cond), a=self.map_sexpr(e.a), b=self.map_sexpr(e.b))


_METHODS = {L.Loop: "map_loop", L.If: "map_if", L.StageBlock: "map_if", L.Decl: "map_decl", L.Assign: "map_assign",
            L.Accum: "map_accum", L.Barrier: "map_barrier", L.AsyncCopy: "map_assign", L.AsyncWait: "map_barrier", L.Ld: "map_ld", L.Lit: "map_lit", L.Ix: "map_ix", L.Un: "map_un",
            L.Cvt: "map_cvt", L.Bin: "map_bin", L.Sel: "map_sel"}


# ----------------------------------------------------------------------------- functions built on it
class _OnIndex(Mapper):
    def __init__(self, on_iexpr: Callable[[IExpr], IExpr]) -> None:
        self.on_iexpr = on_iexpr

    def map_iexpr(self, e: IExpr) -> IExpr:
        new = self.on_iexpr(e)
        return e if new == e else new  # an equal rebuild (substitution refolds) is no change


class _OnLoads(Mapper):
    def __init__(self, load: Callable[[L.Ld], L.SExpr]) -> None:
        self.load = load

    def map_ld(self, e: L.Ld) -> L.SExpr:
        return self.load(e)


def map_node(node: Any, on_iexpr: Callable[[IExpr], IExpr]) -> Any:
    """``node`` (a block, statement, expression or tuple of them) with every whole index
    expression ``e`` replaced by ``on_iexpr(e)``."""
    return _OnIndex(on_iexpr).map(node)


def subst_node(node: Any, var: int, value: IExpr) -> Any:
    """``node`` with loop variable ``var`` replaced by ``value`` in every index expression."""
    return map_node(node, lambda e: substitute(e, var, value))


def map_loads(e: L.SExpr, load: Callable[[L.Ld], L.SExpr]) -> L.SExpr:
    """The scalar expression ``e`` with every load ``ld`` replaced by ``load(ld)``."""
    return _OnLoads(load).map_sexpr(e)
