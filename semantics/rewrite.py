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
"""
from __future__ import annotations

import ast
import copy
import inspect
import itertools
import textwrap
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


class _JumpGuard(ast.NodeTransformer):
    """Replace break / continue / return at this loop level by a capture error."""

    def _fail(self, node: ast.stmt, what: str) -> ast.stmt:
        call = ast.parse(f"{RT}.bad_jump({what!r})").body[0]
        return ast.copy_location(call, node)

    def visit_Break(self, node: ast.Break) -> ast.stmt:
        return self._fail(node, "break")

    def visit_Continue(self, node: ast.Continue) -> ast.stmt:
        return self._fail(node, "continue")

    def visit_Return(self, node: ast.Return) -> ast.stmt:
        return self._fail(node, "return")

    def _stop(self, node: ast.AST) -> ast.AST:  # inner loops and functions own their jumps
        return node

    visit_For = visit_While = visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _stop


class _LoopRewriter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.counter = itertools.count()

    def visit_For(self, node: ast.For) -> Any:
        self.generic_visit(node)  # rewrite inner loops first
        n = next(self.counter)
        it = f"__tc_it{n}"
        names = assigned_names(node.body)
        peek = "(" + "".join(f"{RT}.peek(lambda: {x}), " for x in names) + ")"
        lhs = "(" + "".join(f"{x}, " for x in names) + ")"
        tgt = ast.unparse(node.target)
        src = textwrap.dedent(f"""
            {it} = None
            if {RT}.is_region({it}):
                {tgt}, {lhs} = {it}.__tc_enter__({tuple(names)!r}, {peek}, {tgt!r})
                pass
                {lhs} = {it}.__tc_exit__({peek})
            else:
                for {tgt} in {it}:
                    pass
            """)
        stmts = ast.parse(src).body
        for stmt in stmts:  # generated code reports the loop's own line
            for sub in ast.walk(stmt):
                if isinstance(sub, (ast.expr, ast.stmt)):
                    ast.copy_location(sub, node)
        stmts[0].value = node.iter
        region_body = [_JumpGuard().visit(copy.deepcopy(s)) for s in node.body]
        branch = stmts[1]
        branch.body[1:2] = region_body
        loop = branch.orelse[0]
        loop.body = node.body
        loop.orelse = node.orelse
        if node.orelse:
            branch.body.insert(0, ast.parse(f"{RT}.bad_jump('for-else')").body[0])
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
    fdef = _LoopRewriter().visit(fdef)
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
    cells = [c.cell_contents for c in (fn.__closure__ or ())]
    new_fn = namespace["__tc_factory"](*cells, runtime)
    new_fn.__defaults__ = fn.__defaults__
    new_fn.__kwdefaults__ = fn.__kwdefaults__
    return new_fn
