"""``@tc.kernel``: signature analysis, source rewriting and capture into a ``Program``."""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Callable

from . import ir
from .builder import _ACTIVE, Builder
from .dtypes import DType, dtype_of
from .errors import CaptureError, Loc, TilecertError, caller_loc
from .index import ISize
from .regions import UNBOUND, RegionSpec
from .rewrite import rewrite_function
from .tensors import Memory, TensorRef
from .values import Tile


class TensorSpec:
    """The annotation ``tc.Tensor[f32, "M", "K"]``: dtype and dim names."""

    def __init__(self, dtype: DType, dims: tuple[str, ...]) -> None:
        self.dtype = dtype
        self.dims = dims

    def __repr__(self) -> str:
        return f"Tensor[{self.dtype.name}, {', '.join(map(repr, self.dims))}]"


class Tensor:
    """Use as an annotation: ``A: tc.Tensor[f32, "M", "K"]`` (equal names are one dim)."""

    def __class_getitem__(cls, params: Any) -> TensorSpec:
        if not isinstance(params, tuple) or len(params) < 1:
            raise TilecertError("Tensor annotations are Tensor[dtype, 'dim', ...]", hint='Tensor[f32, "M", "K"]')
        dt = dtype_of(params[0])
        names = params[1:]
        for n in names:
            if not isinstance(n, str) or not n.isidentifier():
                raise TilecertError(f"tensor dim names must be identifiers, got {n!r}", hint='Tensor[f32, "M", "K"]')
        return TensorSpec(dt, tuple(names))


class _Runtime:
    """The helpers that rewritten kernel code calls (see ``rewrite``)."""

    @staticmethod
    def is_region(x: Any) -> bool:
        return isinstance(x, RegionSpec)

    @staticmethod
    def peek(thunk: Callable[[], Any]) -> Any:
        try:
            return thunk()
        except NameError:
            return UNBOUND

    @staticmethod
    def label(names: tuple[str, ...], values: tuple[Any, ...]) -> None:
        """Name the tiles and memories just bound to DSL variables (the first binding of each wins)."""
        b = _ACTIVE[-1]
        for name, value in zip(names, values):
            if isinstance(value, Tile):
                b.value_labels.setdefault(value.value.id, name)
            elif isinstance(value, Memory):
                b.mem_labels.setdefault(value.info.mem, name)

    @staticmethod
    def bad_jump(what: str) -> None:
        raise CaptureError(f"`{what}` inside a region loop only affects capture",
                           hint="region bodies run once at capture; use tc.where or guards for data choices")


RUNTIME = _Runtime()


class Kernel:
    """A captured-on-demand tile kernel; ``capture(**config)`` returns its ``Program``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.loc = Loc(fn.__code__.co_filename, fn.__code__.co_firstlineno)
        self.tensors: dict[str, TensorSpec] = {}
        self.config_defaults: dict[str, Any] = {}
        sig = inspect.signature(fn)
        hints = getattr(fn, "__annotations__", {})
        for pname, param in sig.parameters.items():
            ann = hints.get(pname, param.annotation)
            if isinstance(ann, str):  # `from __future__ import annotations` keeps annotations as text
                try:
                    ann = eval(ann, dict(fn.__globals__))  # noqa: S307
                except Exception:  # an annotation that does not evaluate is no tensor annotation
                    ann = None
            if isinstance(ann, TensorSpec):
                self.tensors[pname] = ann
            elif param.default is not inspect.Parameter.empty:
                self.config_defaults[pname] = param.default
            else:
                raise CaptureError(f"parameter `{pname}` of kernel {self.name} is neither a tensor nor a config "
                                   "value with a default", self.loc,
                                   'annotate tensors as tc.Tensor[f32, "M", "K"]; give config ints a default')
        self._rewritten: Callable[..., Any] | None = None
        self._cache: dict[tuple, ir.Program] = {}
        self.__doc__ = fn.__doc__
        self.__name__ = self.name

    @property
    def size_names(self) -> tuple[str, ...]:
        seen: list[str] = []
        for spec in self.tensors.values():
            for d in spec.dims:
                if d not in seen:
                    seen.append(d)
        return tuple(seen)

    def split_config(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        config = dict(self.config_defaults)
        for k in list(kwargs):
            if k in self.config_defaults:
                config[k] = kwargs.pop(k)
        return config

    def capture(self, **config: Any) -> ir.Program:
        """The kernel's IR for these config values (cached)."""
        if _ACTIVE:  # checked before the cache: a cached program must not hide the misuse
            raise CaptureError("tile kernel captures cannot be nested", caller_loc(),
                               "call tc.run on a kernel from host code, not from inside another kernel")
        unknown = set(config) - set(self.config_defaults)
        if unknown:
            raise CaptureError(f"unknown config parameter(s) {sorted(unknown)} for kernel {self.name}", self.loc,
                               f"config parameters are {sorted(self.config_defaults)}")
        full = {**self.config_defaults, **config}
        key = tuple(sorted((k, repr(v)) for k, v in full.items()))
        if key not in self._cache:
            self._cache[key] = self._capture(full)
        return self._cache[key]

    def _capture(self, config: dict[str, Any]) -> ir.Program:
        if _ACTIVE:
            raise CaptureError("tile kernel captures cannot be nested", self.loc,
                               "call tc.run on a kernel from host code, not from inside another kernel")
        if self._rewritten is None:
            self._rewritten = rewrite_function(self.fn, RUNTIME)
        b = Builder(self.name)
        b.root.loc = self.loc
        args: dict[str, Any] = {}
        for pname, spec in self.tensors.items():
            dims = tuple(b.dim(d) for d in spec.dims)
            args[pname] = TensorRef(pname, spec.dtype, dims, tuple(ISize(d) for d in spec.dims))
        _ACTIVE.append(b)
        try:
            try:
                self._rewritten(**args, **config)
            except RecursionError:
                raise CaptureError(f"the capture of kernel {self.name} recursed beyond Python's limit", self.loc,
                                   "a helper function calls itself without end (a kernel body runs once, at "
                                   "capture)") from None
            if len(b.frames) != 1:
                raise CaptureError("unterminated execution nest at end of kernel capture", self.loc,
                                   "do not return from inside a region loop")
        finally:
            _ACTIVE.pop()
        decls = tuple(
            ir.TensorDecl(pname, spec.dtype.name, tuple(b.dim(d) for d in spec.dims),
                          tuple(ISize(d) for d in spec.dims), pname in b.written)
            for pname, spec in self.tensors.items())
        body = b.labelled(ir.Block((), tuple(b.root.ops), ()))
        cfg = tuple(sorted((k, v) for k, v in config.items() if isinstance(v, (int, float, bool))))
        return ir.Program(self.name, self.size_names, decls, body, cfg, self.loc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if _ACTIVE:
            raise CaptureError(f"kernel {self.name} called while a kernel is captured (recursion or a nested "
                               "kernel)", caller_loc(), "kernels cannot call kernels: move the shared code into a "
                               "plain Python helper function")
        tensors = ", ".join(f"{t}=array" for t in self.tensors)
        raise CaptureError(f"kernel {self.name} is not called directly", caller_loc(),
                           f"run it with tc.run({self.name}, {tensors}) or compile it with tc.compile")

    def __repr__(self) -> str:
        return f"<tilecert kernel {self.name}>"


_SUSPENDING = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def kernel(fn: Callable[..., Any]) -> Kernel:
    """Decorate a function written in the tile DSL: a plain ``def`` (not a class, not a kernel, no
    ``yield`` and not ``async``: its body runs once, at capture)."""
    loc = caller_loc()
    if isinstance(fn, Kernel):
        raise CaptureError(f"{fn.name} is already a @tc.kernel", loc, "decorate the function once")
    if inspect.isclass(fn):
        raise CaptureError(f"@tc.kernel applies to a function, not to the class {fn.__name__}", loc,
                           "decorate a `def` whose parameters are the tensors and config values")
    if not inspect.isfunction(fn):
        raise CaptureError(f"@tc.kernel applies to a plain function, got a {type(fn).__name__}", loc,
                           "decorate a `def`")
    if fn.__code__.co_flags & _SUSPENDING:
        raise CaptureError(f"kernel {fn.__name__} is a generator or coroutine (`yield`, `await` or `async def`): "
                           "its body would never run", _suspension_loc(fn),
                           "remove the yield / async: a kernel body runs once at capture and returns nothing")
    return Kernel(fn)


def _suspension_loc(fn: Callable[..., Any]) -> Loc:
    """The line of ``fn``'s first ``yield`` / ``await`` (outside nested functions), else of its ``def``."""
    first = fn.__code__.co_firstlineno
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return Loc(fn.__code__.co_filename, first)
    todo = list(ast.iter_child_nodes(tree.body[0]))
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return Loc(fn.__code__.co_filename, first + node.lineno - 1)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return Loc(fn.__code__.co_filename, first)
