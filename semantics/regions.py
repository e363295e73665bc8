"""Region constructors and scope handles: parallel, serial, pipeline, reduce, stage cuts.

``for nest in tc.parallel(...)`` runs its body once at capture (see ``rewrite``): entering
opens a region frame and binds carried variables to the body's block arguments; leaving
closes the frame, yields the carried values and rebinds them to the region's results.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from . import ir
from .bindings import DSL_BINDINGS, dsl_contains, region_bindings
from .builder import Frame, active
from .errors import CaptureError, Loc, caller_loc
from .index import IConst, IVar
from .pipeline.stages import impure_prelude
from .values import Idx, Tile, index_expr

class _Unbound:
    """Placeholder for a name the loop body assigns but that had no value before the loop."""

    def __repr__(self) -> str:
        return "<unbound>"


UNBOUND = _Unbound()


class Nest:
    """A scope handle: the loop variable of a region (``nest``, ``k``, ``r``)."""

    def __init__(self, kind: str, region: int, rank: int, parent: Optional["Nest"], frame: Frame) -> None:
        self.kind = kind
        self.region = region
        self.rank = rank
        self.parent = parent
        self.frame = frame

    def _live(self, what: str) -> None:
        if not self.frame.open:
            raise CaptureError(f"{what} on a {self.kind} handle outside its range",
                               hint="a scope handle is only valid inside its own loop")

    def index(self, axis: Optional[int] = None) -> Idx:
        """The local coordinate (``axis`` may be omitted for a rank-one domain)."""
        self._live("index()")
        if axis is None:
            if self.rank != 1:
                raise CaptureError(f"index() without an axis requires a rank-one nest (this one has rank {self.rank})",
                                   hint="call index(axis)")
            axis = 0
        if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < self.rank:
            raise CaptureError(f"axis {axis!r} out of range for a rank-{self.rank} nest", hint="0 <= axis < rank")
        return Idx(IVar(self.region, axis))

    def coord(self) -> tuple[Idx, ...]:
        """The full path: the ancestors' coordinates followed by this nest's own."""
        self._live("coord()")
        head = self.parent.coord() if self.parent is not None else ()
        return head + tuple(Idx(IVar(self.region, a)) for a in range(self.rank))

    def _child(self, kind: str, extents: Sequence[Any], **attrs: Any) -> "RegionSpec":
        self._live(f"{kind}()")
        return RegionSpec(kind, extents, self, attrs)

    def parallel(self, *extents: Any, bind: Optional[str] = None) -> "RegionSpec":
        return self._child("parallel", extents, bind=bind)

    def serial(self, *extents: Any) -> "RegionSpec":
        return self._child("serial", extents)

    def pipeline(self, *extents: Any, window: int = 2, interval: int = 1) -> "RegionSpec":
        return self._child("pipeline", extents, window=window, interval=interval)

    def reduce(self, *extents: Any, policy: str = "unordered_tree") -> "RegionSpec":
        return self._child("reduce", extents, policy=policy)

    def stage(self, name: Optional[str] = None) -> None:
        """Advance the pipeline's stage cursor: the following ops form the next stage."""
        b = active()
        if self.kind != "pipeline" or b.top is not self.frame:
            raise CaptureError("stage() is only valid on the active pipeline nest",
                               hint="call k.stage(...) directly in the body of `for k in ....pipeline(...)`")
        f = self.frame
        if name is not None and not isinstance(name, str):
            raise CaptureError(f"stage names are strings, got {name!r}", hint='k.stage("load")')
        label = name if name is not None else f"stage{len(f.stages)}"
        if label in f.stages:
            raise CaptureError(f"stage name {label!r} repeats in this pipeline", hint="give each stage a unique name")
        impure = impure_prelude(f.ops) if not f.stages else None
        if impure is not None:
            what = type(impure).__name__.lower() if isinstance(impure, (ir.Parallel, ir.Alloc, *ir.LOOP_TYPES)) \
                else ir.op_name(impure)
            raise CaptureError(f"tile operations precede the first stage cut of this pipeline: `{what}` at "
                               f"{getattr(impure, 'loc', '?')} is not pure index math",
                               hint="call k.stage(...) before the first such operation (only index values, "
                                    "k.index() as a tile, and arithmetic on them may precede it)")
        b.emit(ir.Stage(label, len(f.stages), caller_loc()))
        f.stages.append(label)


def enclosing_bindings(nest: Optional[Nest]) -> tuple[str, ...]:
    """The DSL bindings of the bound parallel regions around (and including) ``nest``, outermost first."""
    out: list[str] = []
    while nest is not None:
        if nest.kind == "parallel" and nest.frame.handle_binding:
            out.append(nest.frame.handle_binding)
        nest = nest.parent
    return tuple(reversed(out))


class RegionSpec:
    """What ``tc.parallel(...)`` / ``nest.serial(...)`` return: iterated once by a kernel."""

    def __init__(self, kind: str, extents: Sequence[Any], parent: Optional[Nest], attrs: dict[str, Any]) -> None:
        self.kind = kind
        self.parent = parent
        self.attrs = attrs
        self.loc = caller_loc()
        b = active()
        parent_frame = parent.frame if parent is not None else b.root
        if b.top is not parent_frame:
            raise CaptureError("nested execution range must be created from the active parent nest",
                               self.loc, "inside a region, create child regions with the handle: nest.serial(...)")
        if not extents:
            raise CaptureError("execution nest requires a non-empty valid shape", self.loc, "give at least one extent")
        if len(extents) == 1 and isinstance(extents[0], (tuple, list)):
            extents = tuple(extents[0])
        self.extents = tuple(index_expr(e, f"{kind} extent") for e in extents)
        for e in self.extents:
            if isinstance(e, IConst) and e.value < 0:
                raise CaptureError(f"negative {kind} extent {e.value}", self.loc, "extents are >= 0")
        self._check_attrs()
        self.frame: Optional[Frame] = None

    def _check_attrs(self) -> None:
        a = self.attrs
        if self.kind == "pipeline":
            for key, low in (("window", 0), ("interval", 1)):
                v = a[key]
                if not isinstance(v, int) or isinstance(v, bool) or v < low:
                    raise CaptureError(f"pipeline {key} must be an int >= {low}, got {v!r}", self.loc,
                                       "interval >= 1; window = 0 lets the planner choose, 1 disables overlap")
        if self.kind == "reduce" and a["policy"] not in ir.POLICIES:
            raise CaptureError(f"unknown reduction policy {a['policy']!r}", self.loc,
                               f"use one of {', '.join(ir.POLICIES)}")
        if self.kind == "parallel" and a.get("bind") is not None:
            bind = a["bind"]
            if bind not in DSL_BINDINGS:
                raise CaptureError(f"unknown execution binding {bind!r}", self.loc, f"use one of {', '.join(DSL_BINDINGS)}")
            enclosing = enclosing_bindings(self.parent)
            if enclosing and not dsl_contains(enclosing[-1], bind):
                raise CaptureError(f"nested concrete execution scopes violate containment: {enclosing[-1]!r} "
                                   f"does not contain {bind!r}", self.loc,
                                   "bind outer levels to larger scopes (block > warp > thread > vector, core > vector)")
            region_bindings(bind, enclosing, len(self.extents), self.loc)

    def __iter__(self):
        raise CaptureError(f"this {self.kind} region is iterated outside a kernel body", self.loc,
                           "region loops must be written in the @tc.kernel function itself")

    # ------------------------------------------------------------------ protocol used by rewritten loops
    def __tc_enter__(self, names: tuple[str, ...], values: tuple[Any, ...],
                     target: str = "", lines: tuple[int, ...] = ()) -> tuple[Nest, tuple[Any, ...]]:
        b = active()
        region = b.new_region()
        frame = b.push(Frame(self.kind, region, self.loc))
        frame.handle_binding = self.attrs.get("bind")
        frame.statically_nonempty = all(isinstance(e, IConst) and e.value > 0 for e in self.extents)
        self.frame = frame
        self.target = target
        self.names = names
        self.lines = lines
        self.body_file = caller_loc().file  # the kernel whose loop this is (lines are in its file)
        self.inits = values
        self.carried: list[tuple[int, Tile, ir.Value]] = []
        bound: list[Any] = []
        for i, v in enumerate(values):
            # a tile whose defining region has closed is dead: rebinding its name starts a fresh value
            if isinstance(v, Tile) and self.kind != "parallel" and v.frame.open:
                b.check_value(v.frame, f"carried `{names[i]}`")
                arg = b.new_value(v.type)
                b.value_labels[arg.id] = names[i]
                self.carried.append((i, v, arg))
                bound.append(Tile(arg, frame))
            else:
                bound.append(v)
        frame.args = tuple(arg for _, _, arg in self.carried)
        handle = Nest(self.kind, region, len(self.extents), self.parent, frame)
        frame.handle = handle
        return handle, tuple(bound)

    def _name_loc(self, i: int) -> Loc:
        """Where the loop body last binds its ``i``-th assigned name (the loop's own line if unknown)."""
        line = self.lines[i] if i < len(self.lines) else 0
        return Loc(self.body_file, line) if line else self.loc

    def __tc_exit__(self, values: tuple[Any, ...]) -> tuple[Any, ...]:
        b = active()
        frame = self.frame
        assert frame is not None
        if b.top is not frame:
            raise CaptureError("execution nests must close in lexical order", self.loc,
                               "do not leave a region from inside a nested one")
        for i, (name, before, after) in enumerate(zip(self.names, self.inits, values)):
            if self.kind == "parallel" and isinstance(before, Tile) and before.frame.open and after is not before:
                b.pop(frame)
                raise CaptureError(f"parallel nests cannot mutate an outer value (`{name}`)", self._name_loc(i),
                                   "observable results of parallel instances go through stores to tensors or memories")
            if not isinstance(before, (Tile, Nest, RegionSpec, _Unbound)) and isinstance(after, Tile) \
                    and isinstance(before, (int, float, bool)):
                b.pop(frame)
                raise CaptureError(f"`{name}` is carried by this {self.kind} loop but starts as the Python number "
                                   f"{before!r}", self._name_loc(i),
                                   f"start it as a tile: {name} = tc.full(dtype, (), {before!r})")
        yields: list[int] = []
        for i, init, arg in self.carried:
            after = values[i]
            name = self.names[i]
            if not isinstance(after, Tile):
                b.pop(frame)
                raise CaptureError(f"loop-carried value `{name}` became a {type(after).__name__}", self._name_loc(i),
                                   "a carried variable must stay a tile of one type")
            if after.type != init.type:
                b.pop(frame)
                raise CaptureError(f"loop-carried value `{name}` changed type from {init.type} to {after.type}",
                                   self._name_loc(i),
                                   "keep the dtype, dims and extents of a carried tile across iterations")
            yields.append(after.use(f"carried `{name}`"))
        b.pop(frame)
        body = ir.Block(frame.args, tuple(frame.ops), tuple(yields))
        parent = b.top
        if frame.statically_nonempty and self.kind != "parallel":
            parent.stored_mems |= frame.stored_mems
        if self.kind == "parallel":
            b.emit(ir.Parallel(frame.region, self.extents, body, self.attrs.get("bind"), self.target, self.loc))
            return values
        outs = tuple(b.new_value(init.type) for _, init, _ in self.carried)
        for (i, _, _), out in zip(self.carried, outs):
            b.value_labels[out.id] = self.names[i]
        inits = tuple(init.value.id for _, init, _ in self.carried)
        common = dict(region=frame.region, extents=self.extents, inits=inits, body=body, outs=outs, loc=self.loc,
                      name=self.target)
        if self.kind == "serial":
            b.emit(ir.Serial(**common))
        elif self.kind == "pipeline":
            b.emit(ir.Pipeline(**common, window=self.attrs["window"], interval=self.attrs["interval"]))
        else:
            b.emit(ir.Reduce(**common, policy=self.attrs["policy"]))
        result = list(values)
        for (i, _, _), out in zip(self.carried, outs):
            result[i] = Tile(out, parent)
        return tuple(result)


def root_region(kind: str, extents: Sequence[Any], **attrs: Any) -> RegionSpec:
    return RegionSpec(kind, extents, None, attrs)


def parallel(*extents: Any, bind: Optional[str] = None) -> RegionSpec:
    """A parallel region at the kernel root: independent instances over ``extents``."""
    return root_region("parallel", extents, bind=bind)


def serial(*extents: Any) -> RegionSpec:
    """A serial region at the kernel root: lexicographic order over ``extents``."""
    return root_region("serial", extents)


def pipeline(*extents: Any, window: int = 2, interval: int = 1) -> RegionSpec:
    """A pipeline region at the kernel root (sequential meaning; window and interval are policy)."""
    return root_region("pipeline", extents, window=window, interval=interval)


def reduction(*extents: Any, policy: str = "unordered_tree") -> RegionSpec:
    """A reduce region at the kernel root (``tc.reduce`` is the tile expression)."""
    return root_region("reduce", extents, policy=policy)
