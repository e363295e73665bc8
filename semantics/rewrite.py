"""Source rewriting that turns region loops into explicit carried state.

A kernel body runs once at capture, so a plain trace cannot see that ``acc`` rebound
inside ``for k in nest.pipeline(...)`` is loop-carried. Each ``for`` loop of the kernel
source is rewritten so that, when its iterable is a region, the loop body runs once
between ``__tc_enter__`` and ``__tc_exit__`` calls that receive the names the body
assigns, with their values before and after the body:

    __tc_it = ITER
    if __tc_rt.is_region(__tc_it):
        TARGET, (a, b) = __tc_it.__tc_enter__(("a", "b"), (peek(lambda: a), peek(lambda: b)))
        BODY            # break / continue / return here are capture errors
        (a, b) = __tc_it.__tc_exit__((peek(lambda: a), peek(lambda: b)))
    else:
        for TARGET in __tc_it:
            BODY        # an ordinary Python loop, unrolled at capture

Loops over Python iterables keep their Python meaning.

Each assignment ``x = EXPR`` (also augmented, annotated and tuple targets) is followed by
``__tc_rt.label(("x",), (x,))``, which names the tile or memory just bound after the DSL
variable (the first binding of a value names it): buffers, loops and diagnostics use it.
"""
from __future__ import annotations

import ast
import copy
import inspect
import itertools
import textwrap
import types
from typing import Any, Callable

from .errors import CaptureError, Loc

RT = "__tc_rt"


def assigned_names(body: list[ast.stmt]) -> list[str]:
    """Names bound by ``body`` (not inside nested functions, lambdas or comprehensions)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in found:
            found.append(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in body:
        visit(stmt)
    return [n for n in found if not n.startswith("__tc_")]


def _place(tree: ast.AST, node: ast.AST) -> None:
    """Give generated code the first line of ``node``.

    Expressions get a one-line span: CPython 3.11 reports a method call spanning several
    lines at its last line, which would move diagnostics to the end of the loop.
    """
    for sub in ast.walk(tree):
        if isinstance(sub, (ast.expr, ast.stmt)):
            ast.copy_location(sub, node)
            if isinstance(sub, ast.expr):
                sub.end_lineno = sub.lineno
                sub.end_col_offset = sub.col_offset


class _JumpGuard(ast.NodeTransformer):
    """Replace break / continue / return at this loop level by a capture error."""

    def _fail(self, node: ast.stmt, what: str) -> ast.stmt:
        call = ast.parse(f"{RT}.bad_jump({what!r})").body[0]
        _place(call, node)  # the error reports the jump's own line
        return call

    def visit_Break(self, node: ast.Break) -> ast.stmt:
        return self._fail(node, "break")

    def visit_Continue(self, node: ast.Continue) -> ast.stmt:
        return self._fail(node, "continue")

    def visit_Return(self, node: ast.Return) -> ast.stmt:
        return self._fail(node, "return")

    def _stop(self, node: ast.AST) -> ast.AST:  # inner loops and functions own their jumps
        return node

    visit_For = visit_While = visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _stop


def _store_lines(body: list[ast.stmt], line_offset: int) -> dict[str, int]:
    """For each name ``body`` binds, the file line of its last binding (scoped like ``assigned_names``)."""
    lines: dict[str, int] = {}

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
                             ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            lines[node.id] = max(lines.get(node.id, 0), node.lineno + line_offset)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for stmt in body:
        visit(stmt)
    return lines


class _Labeler(ast.NodeTransformer):
    """Follow each assignment by a call naming the values it binds after their variables."""

    def _label(self, node: ast.stmt, targets: list[ast.expr]) -> Any:
        names = [n.id for t in targets for n in ast.walk(t)
                 if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and not n.id.startswith("__tc_")]
        if not names:
            return node
        values = "(" + "".join(f"{x}, " for x in names) + ")"
        call = ast.parse(f"{RT}.label({tuple(names)!r}, {values})").body[0]
        _place(call, node)
        return [node, call]

    def visit_Assign(self, node: ast.Assign) -> Any:
        return self._label(node, node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        return self._label(node, [node.target])

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        return self._label(node, [node.target]) if node.value is not None else node


class _LoopRewriter(ast.NodeTransformer):
    def __init__(self, line_offset: int = 0) -> None:
        self.counter = itertools.count()
        self.line_offset = line_offset

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)  # rewrite inner loops first
        n = next(self.counter)
        it = f"__tc_it{n}"
        names = assigned_names(node.body)
        peek = "(" + "".join(f"{RT}.peek(lambda: {x}), " for x in names) + ")"
        lhs = "(" + "".join(f"{x}, " for x in names) + ")"
        tgt = ast.unparse(node.target)
        store_lines = _store_lines(node.body, self.line_offset)
        lines = tuple(store_lines.get(x, 0) for x in names)
        src = textwrap.dedent(f"""
            {it} = None
            if {RT}.is_region({it}):
                {tgt}, {lhs} = {it}.__tc_enter__({tuple(names)!r}, {peek}, {tgt!r}, {lines!r})
                BODY
                {lhs} = {it}.__tc_exit__({peek})
            else:
                for {tgt} in {it}:
                    BODY
            """)  # each BODY placeholder is replaced by the loop's own statements below
        stmts = ast.parse(src).body
        for stmt in stmts:  # generated code reports the loop's own line
            _place(stmt, node)
        stmts[0].value = node.iter
        region_body = [_JumpGuard().visit(copy.deepcopy(s)) for s in node.body]
        branch = stmts[1]
        branch.body[1:2] = region_body
        loop = branch.orelse[0]
        loop.body = node.body
        loop.orelse = node.orelse
        if node.orelse:
            bad = ast.parse(f"{RT}.bad_jump('for-else')").body[0]
            _place(bad, node)
            branch.body.insert(0, bad)
        return stmts


def rewrite_function(fn: Callable, runtime: Any) -> Callable:
    """Return ``fn`` recompiled from its rewritten source (same file, same line numbers)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        raise CaptureError(f"cannot read the source of kernel {fn.__name__!r}",
                           Loc(fn.__code__.co_filename, fn.__code__.co_firstlineno),
                           "kernels must be defined in a file (their source is analysed for carried state)")
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise CaptureError("@kernel applies to a plain function", Loc(fn.__code__.co_filename,
                           fn.__code__.co_firstlineno), "decorate a `def`")
    fdef.decorator_list = []
    fdef = _LoopRewriter(fn.__code__.co_firstlineno - 1).visit(_Labeler().visit(fdef))
    freevars = fn.__code__.co_freevars
    factory = ast.FunctionDef(
        name="__tc_factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=a) for a in (*freevars, RT)], kwonlyargs=[],
                           kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_comment=None)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, fn.__code__.co_firstlineno - 1)
    code = compile(module, fn.__code__.co_filename, "exec")
    namespace: dict[str, Any] = {}
    exec(code, fn.__globals__, namespace)
    # Share the kernel's own closure cells (late binding, like the original function): build the
    # rewritten function from its code object, with a fresh cell only for the runtime.
    cellmap = dict(zip(freevars, fn.__closure__ or ()))
    cellmap[RT] = types.CellType(runtime)
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next((c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fdef.name),
                 None)
    if inner is not None and all(n in cellmap for n in inner.co_freevars):
        new_fn = types.FunctionType(inner, fn.__globals__, fn.__name__, None,
                                    tuple(cellmap[n] for n in inner.co_freevars))
        new_fn.__qualname__ = fn.__qualname__
    else:  # the body names the kernel itself: fall back to the factory (closure values snapshotted)
        cells = [c.cell_contents for c in (fn.__closure__ or ())]
        new_fn = namespace["__tc_factory"](*cells, runtime)
    new_fn.__defaults__ = fn.__defaults__
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    return new_fn
