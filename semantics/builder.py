"""The capture state: a stack of open blocks into which DSL calls append IR ops.

One ``Builder`` exists per kernel capture. Frames mirror the lexical region tree; a value
may only be used while the frame that defined it is open (lexical dominance), and an
index expression only while every region whose coordinate it reads is open.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Optional

from . import ir
from .errors import CaptureError, Loc, caller_loc
from .index import IExpr, free_vars

_ACTIVE: list["Builder"] = []


def active() -> "Builder":
    """The builder of the kernel being captured (an error outside a capture)."""
    if not _ACTIVE:
        raise CaptureError("tile operations are only valid inside a @tc.kernel while it is captured",
                           hint="call the op from a kernel body and run it with tc.run(kernel, ...)")
    return _ACTIVE[-1]


@dataclass(eq=False)
class Frame:
    """One open block: the kernel root, a region body, or a custom reducer's body."""

    kind: str  # root | parallel | serial | pipeline | reduce | fn
    region: Optional[int]
    loc: Loc
    args: tuple[ir.Value, ...] = ()
    ops: list[Any] = field(default_factory=list)
    open: bool = True
    parent: Optional["Frame"] = None
    stored_mems: set[int] = field(default_factory=set)
    statically_nonempty: bool = True
    stages: list[str] = field(default_factory=list)
    handle: Any = None
    handle_binding: Optional[str] = None

    def nearest_parallel(self) -> Optional["Frame"]:
        f: Optional[Frame] = self
        while f is not None and f.kind not in ("parallel", "root"):
            f = f.parent
        return f


@dataclass
class MemInfo:
    mem: int
    type: ir.TileType
    owner: Frame
    loc: Loc


class Builder:
    def __init__(self, kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self.root = Frame("root", None, caller_loc())
        self.frames: list[Frame] = [self.root]
        self._next_value = 0
        self._next_region = 0
        self._next_mem = 0
        self._next_dim = 0
        self.dims_by_label: dict[str, ir.Dim] = {}
        self.mems: dict[int, MemInfo] = {}
        self.written: set[str] = set()
        self.open_regions: set[int] = set()
        self.value_labels: dict[int, str] = {}  # value id -> the DSL variable first bound to it
        self.mem_labels: dict[int, str] = {}  # memory id -> the DSL variable first bound to it

    # ------------------------------------------------------------------ ids
    def new_value(self, t: ir.TileType) -> ir.Value:
        v = ir.Value(self._next_value, t)
        self._next_value += 1
        return v

    def new_region(self) -> int:
        self._next_region += 1
        return self._next_region - 1

    def new_mem(self) -> int:
        self._next_mem += 1
        return self._next_mem - 1

    def dim(self, label: str) -> ir.Dim:
        """The kernel-local dim with this label (created on first use)."""
        if label not in self.dims_by_label:
            self.dims_by_label[label] = ir.Dim(self._next_dim, label)
            self._next_dim += 1
        return self.dims_by_label[label]

    def fresh_dim(self, label: str = "") -> ir.Dim:
        d = ir.Dim(self._next_dim, label)
        self._next_dim += 1
        return d

    def labelled(self, node: Any) -> Any:
        """``node`` (an op, block or tuple of them) with every defined value and memory carrying its label."""
        if isinstance(node, tuple):
            return tuple(self.labelled(x) for x in node)
        if isinstance(node, ir.Value):
            return replace(node, label=self.value_labels.get(node.id, ""))
        if isinstance(node, ir.Alloc):
            return replace(node, label=self.mem_labels.get(node.mem, ""))
        if isinstance(node, ir.Block) or (is_dataclass(node) and hasattr(node, "loc")):
            return replace(node, **{f.name: self.labelled(getattr(node, f.name)) for f in fields(node)
                                    if isinstance(getattr(node, f.name), (tuple, ir.Value, ir.Block))})
        return node

    # ------------------------------------------------------------------ frames
    @property
    def top(self) -> Frame:
        return self.frames[-1]

    def push(self, frame: Frame) -> Frame:
        frame.parent = self.top
        self.frames.append(frame)
        if frame.region is not None:
            self.open_regions.add(frame.region)
        return frame

    def pop(self, frame: Frame) -> None:
        if self.top is not frame:
            raise CaptureError("execution nests must close in lexical order", hint="do not keep scope handles across loops")
        self.frames.pop()
        frame.open = False
        if frame.region is not None:
            self.open_regions.discard(frame.region)

    def emit(self, op: Any) -> Any:
        self.top.ops.append(op)
        return op

    # ------------------------------------------------------------------ checks
    def check_value(self, frame: Frame, what: str) -> None:
        if not frame.open:
            raise CaptureError(
                f"{what} was defined inside a region that has closed; it is not visible here",
                hint="a value computed in a loop body is not visible after the loop; carry it by assigning to a "
                     "variable defined before the loop")
        if frame.kind == "fn" and self.top is not frame and self.top.kind != "fn":
            raise CaptureError(f"{what} belongs to a custom reducer's body", hint="reducer bodies are pure functions")

    def check_index(self, e: IExpr, what: str = "index expression") -> IExpr:
        closed = {r for r, _ in free_vars(e)} - self.open_regions
        if closed:
            raise CaptureError(f"{what} {e} uses the coordinate of a region that is not open here",
                               hint="an execution coordinate is readable only inside its own loop")
        return e
