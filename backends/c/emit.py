"""Lowered loop program -> C99 source (one function per kernel).

The function is ``void tc_kernel(<tensor pointers>, <pack pointers>, <sizes>, int *err)``:
tensors by ``restrict`` pointer to C-contiguous row-major storage (``const`` when the kernel
does not write them), in the kernel's tensor order, then one ``const`` pointer per hoisted
constant pack (``Lowered.packs``, in order), then every size parameter as ``int64_t`` in the
program's size order, then the error flag (``prelude.ERROR_MESSAGES``). Each pack's nest is a
function of its own, ``void tc_pack_<k>(<the constant inputs it reads>, <the pack>, <sizes>,
int *err)``, which fills a zeroed buffer; the runner calls it once per identity of those
inputs (``runner.py``). Sizes the schedule bound are compiled in as constants. Loops keep
their scheduled names in comments.

Rendering of the lowered nodes: ``For`` in ``threads`` mode is an OpenMP ``parallel for``
(with ``collapse`` over directly nested rectangular ``threads`` loops, ``num_threads`` from
the target's ``cores`` when set; a ``threads`` loop met inside a parallel region runs
serially within its thread); ``simd`` is ``omp simd`` (``simdlen`` from the target's
``vector_lanes`` when set) when its body is free of atomics, heap buffers and nested simd
loops (else a plain loop); ``Seq`` is a braced block; an ``Alloc`` declares a zeroed array on the stack or
a ``calloc``'d one freed at the end of its block, so buffers declared inside a parallel
loop are private to each thread (not zeroed, and ``malloc``'d, when ``Alloc.zeroed`` is False: the
lowering proved every cell written before it is read), either one aligned to ``ALIGN`` bytes (a
heap buffer is rounded up inside an allocation ``ALIGN`` bytes longer); an atomic update is an
``omp critical`` section.

A buffer declared with a layout (``semantics.layout``) is accessed at its physical offset
(``layout.physical_offset``, rendered over ``CInt`` operands): the row-major offset over the
declared (padded) shape with the minor coordinate replaced by the physical column; a layout the
buffer does not admit (``Swizzle.requirements``) is refused.

Identifiers never come from user text unchecked: every C name is ``text.c_ident`` (a fixed
prefix, a number and the DSL name reduced to ``[A-Za-z0-9_]``) and every comment is
``text.c_comment`` (escaped to one ASCII line that cannot close the comment).
"""
from __future__ import annotations

import math
from typing import Callable, Optional

from tilecert.lowering.program import Alloc, For, Guard, Lowered, LoweringError, Node, Pack, Seq, Store, Sync, walk
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import IBin, IConst, IExpr, INot, ISize, IVar, const_value, free_vars
from tilecert.semantics.layout import Swizzle, physical_offset

from ..text import c_comment, c_ident
from .prelude import INT_TYPES, prelude
from .views import Forwarding, forwarding

SYMBOL = "tc_kernel"
PACK_SYMBOL = "tc_pack_"  # + the pack's number in Lowered.packs
ALIGN = 64  # bytes: local buffers start on a cache line, so a row of a tile spans as few lines as it can
ALIGNED = f"__attribute__((aligned({ALIGN})))"
C_TYPES = {"bool": "uint8_t", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
           "u8": "uint8_t", "f16": "_Float16", "bf16": "float", "f32": "float", "f64": "double"}
_INDEX_OPS = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==",
              "ne": "!=", "and": "&&", "or": "||"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh"}


def _float_literal(value: float, dtype: str) -> str:
    """A C constant of ``dtype`` with the value of Python float ``value`` rounded once from double."""
    if math.isnan(value):
        text = "NAN"
    elif math.isinf(value):
        text = "INFINITY" if value > 0 else "(-INFINITY)"
    else:
        text = float(value).hex()
    return f"((_Float16)(double){text})" if dtype == "f16" else f"(({C_TYPES[dtype]}){text})"


def _c_operator(symbol: str) -> Callable[["CInt", "CInt | int"], "CInt"]:
    def apply(self: "CInt", other: "CInt | int") -> "CInt":
        return CInt(f"({self.text} {symbol} {other.text if isinstance(other, CInt) else int(other)})")
    return apply


class CInt:
    """The C text of an ``int64_t`` expression, combined by Python's operators (so the layout maps of
    ``semantics.layout``, written once over such operands, render as C); an int operand is a literal."""

    def __init__(self, text: str) -> None:
        self.text = text

    __xor__, __and__, __or__ = _c_operator("^"), _c_operator("&"), _c_operator("|")
    __rshift__, __lshift__ = _c_operator(">>"), _c_operator("<<")
    __add__, __mul__ = _c_operator("+"), _c_operator("*")


class Emitter:
    def __init__(self, lp: Lowered, target: Target = DEFAULT_TARGET) -> None:
        self.lp = lp
        self.target = target
        self.bound = dict(lp.bound)
        self.names: dict[str, str] = {}
        self.dtypes: dict[str, str] = {}
        self.shapes: dict[str, tuple[IExpr, ...]] = {}
        self.layouts: dict[str, Swizzle] = {}
        self.sizes = {s: c_ident("S", s, k) for k, s in enumerate(lp.sizes)}
        for k, t in enumerate(lp.tensors):
            self.names[t.name] = c_ident("T", t.name, k)
            self.dtypes[t.name] = t.dtype
            self.shapes[t.name] = t.shape
        self.counter = 0
        self.lines: list[str] = []
        self.in_kernel = False  # emitting the kernel proper (where a tile may be read from a pack: ``views``)
        self.forwards: dict[str, Forwarding] = {}  # the tiles read from packs where the emitter is
        self.ranges: dict[int, tuple[int, int]] = {}  # the constant ranges of the loops around it

    # ------------------------------------------------------------------ index expressions
    def index(self, e: IExpr) -> str:
        if isinstance(e, IConst):
            return f"INT64_C({e.value})" if abs(e.value) >= 2**31 else (str(e.value) if e.value >= 0 else f"({e.value})")
        if isinstance(e, ISize):
            if e.name in self.bound:
                return str(self.bound[e.name])
            if e.name not in self.sizes:
                raise LoweringError(f"unknown size parameter {e.name!r}", hint="the program is malformed")
            return self.sizes[e.name]
        if isinstance(e, IVar):
            return f"i{e.region}"
        if isinstance(e, INot):
            return f"(!{self.index(e.a)})"
        if isinstance(e, IBin):
            a, b = self.index(e.a), self.index(e.b)
            if e.op in _INDEX_OPS:
                return f"({a} {_INDEX_OPS[e.op]} {b})"
            if e.op in ("min", "max"):
                return f"tc_{e.op}({a}, {b})"
            if e.op in ("floordiv", "mod"):
                if isinstance(e.b, IConst) and e.b.value > 0:
                    return f"tc_{e.op}_c({a}, {b})"
                return f"tc_{e.op}({a}, {b}, err)"
        raise LoweringError(f"index expression {e} has no C form", hint="the program is malformed")

    def offset(self, buf: str, index: tuple[IExpr, ...]) -> str:
        shape = self.shapes[buf]
        if not index:
            return "0"
        layout = self.layouts.get(buf)
        if layout is not None:  # declare() checked that the layout applies: rank >= 2, a constant minor dim
            return physical_offset(layout, [CInt(self.index(i)) for i in index], [CInt(self.index(n)) for n in shape],
                                   shape[-1].value, dtype_of(self.dtypes[buf]).itemsize).text
        out = self.index(index[0])
        for i, n in zip(index[1:], shape[1:]):
            out = f"({out} * {self.index(n)} + {self.index(i)})"
        return out

    def ref(self, buf: str, index: tuple[IExpr, ...]) -> str:
        if buf in self.forwards:
            fw = self.forwards[buf]
            return self.ref(fw.pack, fw.read(index, self.ranges))
        if buf not in self.names:
            raise LoweringError(f"buffer {buf!r} is used outside its allocation", hint="the program is malformed")
        return f"{self.names[buf]}[{self.offset(buf, index)}]"

    # ------------------------------------------------------------------ scalar expressions
    def expr(self, e: L.SExpr) -> str:
        if isinstance(e, L.Ld):
            return self.ref(e.buf, e.index)
        if isinstance(e, L.Lit):
            return literal(e.value, e.dtype)
        if isinstance(e, L.Ix):
            return convert(f"((int64_t){self.index(e.expr)})", "i64", e.dtype)
        if isinstance(e, L.Cvt):
            return convert(self.expr(e.x), e.x.dtype, e.dtype)
        if isinstance(e, L.Un):
            return unary(e.fn, self.expr(e.x), e.x.dtype, e.dtype)
        if isinstance(e, L.Bin):
            if e.a.dtype != e.b.dtype or (e.fn not in _CMP and e.fn not in ("and", "or") and e.a.dtype != e.dtype):
                raise LoweringError(f"`{e.fn}` of {e.a.dtype} and {e.b.dtype} giving {e.dtype}",
                                    hint="binary operands share the result's dtype (comparisons give bool)")
            return binary(e.fn, self.expr(e.a), self.expr(e.b), e.a.dtype)
        if isinstance(e, L.Sel):
            out = f"({self.expr(e.cond)} ? {self.expr(e.a)} : {self.expr(e.b)})"
            return f"tc_bf16{out}" if e.dtype == "bf16" else out
        raise LoweringError(f"unknown scalar expression {type(e).__name__}", hint="the program is malformed")

    # ------------------------------------------------------------------ statements
    def emit(self, line: str, depth: int) -> None:
        self.lines.append("    " * depth + line)

    def body(self, nodes: tuple[Node, ...], depth: int, in_threads: bool, in_simd: bool) -> None:
        for k, node in enumerate(nodes):
            fw = self.forwarding(node, nodes[k + 1:])
            if fw is not None:
                self.emit(c_comment(f"{node.scope} {node.buf}: read from pack {fw.pack}, its copy "
                                    f"S{fw.store.sid} elided"), depth)
                self.forwards[node.buf] = fw  # no other tile of its name is declared in its scope (views)
                after = nodes[k + 1:]
                self.body(after[:fw.at] + after[fw.at + 1:], depth, in_threads, in_simd)
                del self.forwards[node.buf]
                return
            if isinstance(node, Alloc) and node.storage == "heap":
                self.heap(node, nodes[k + 1:], depth, in_threads, in_simd)
                return
            self.node(node, depth, in_threads, in_simd)

    def node(self, node: Node, depth: int, in_threads: bool, in_simd: bool) -> None:
        if isinstance(node, For):
            self.loop(node, depth, in_threads, in_simd)
        elif isinstance(node, Guard):
            self.emit(f"if ({self.index(node.cond)}) {{", depth)
            self.body(node.body, depth + 1, in_threads, in_simd)
            self.emit("}", depth)
        elif isinstance(node, Seq):
            self.emit("{ " + c_comment(node.label), depth)
            self.body(node.body, depth + 1, in_threads, in_simd)
            self.emit("}", depth)
        elif isinstance(node, Alloc):
            self.declare(node)
            size = math.prod(s.value for s in node.shape)  # stack buffers have constant shapes
            fill = " = {0}" if node.zeroed else ""
            self.emit(f"{C_TYPES[node.dtype]} {self.names[node.buf]}[{max(size, 1)}] {ALIGNED}{fill};  "
                      + c_comment(f"{node.scope} {node.buf}" + ("" if node.zeroed else ", written before read")), depth)
        elif isinstance(node, Store):
            self.store(node, depth)
        elif isinstance(node, Sync):
            self.emit(c_comment(f"{node.scope} barrier: participants run in sequence here"), depth)

    def forwarding(self, node: Node, rest: tuple[Node, ...]) -> Optional[Forwarding]:
        """How tile ``node`` is read from a pack in the kernel proper (``views``), None: a buffer of its own."""
        if not isinstance(node, Alloc) or not self.in_kernel:
            return None
        packs = {pk.buf: self.lp.body[pk.start] for pk in self.lp.packs}
        return forwarding(node, rest, self.lp.kernel_body, packs, self.bound)

    def declare(self, node: Alloc) -> None:
        self.counter += 1
        self.names[node.buf] = c_ident("b", node.buf, self.counter)
        self.dtypes[node.buf] = node.dtype
        self.shapes[node.buf] = node.shape
        self.layouts.pop(node.buf, None)
        if node.layout is not None:
            why = node.layout.requirements(L.Buffer(node.buf, node.dtype, node.shape, node.scope, node.layout))
            if why is not None:
                raise LoweringError(f"buffer {node.buf} cannot be stored in {node.layout}: {why}",
                                    hint="declare it with a shape the layout admits (semantics.layout)")
            self.layouts[node.buf] = node.layout

    def heap(self, node: Alloc, rest: tuple[Node, ...], depth: int, in_threads: bool, in_simd: bool) -> None:
        self.declare(node)
        name, ctype = self.names[node.buf], C_TYPES[node.dtype]
        count = " * ".join(f"(size_t)tc_max({self.index(s)}, 0)" for s in node.shape) or "1"
        size = f"({count} + 1) * sizeof({ctype}) + {ALIGN}"
        alloc = f"calloc({size}, 1)" if node.zeroed else f"malloc({size})"
        self.emit(f"void *{name}_mem = {alloc};  "
                  + c_comment(f"{node.scope} {node.buf}" + ("" if node.zeroed else ", written before read")), depth)
        self.emit(f"if ({name}_mem == NULL) {{ tc_fail(err, TC_ERR_NO_MEMORY); }} else {{", depth)
        self.emit(f"{ctype} *restrict {name} = ({ctype} *)(((uintptr_t){name}_mem + {ALIGN - 1}) & "
                  f"~(uintptr_t){ALIGN - 1});", depth + 1)
        self.body(rest, depth + 1, in_threads, in_simd)
        self.emit(f"free({name}_mem);", depth + 1)
        self.emit("}", depth)

    def loop(self, f: For, depth: int, in_threads: bool, in_simd: bool) -> None:
        note = f"{f.name}: {f.kind}" + (f" bound to {f.binding}" if f.binding else "")
        mode = f.mode
        if mode == "threads" and in_threads:
            note += " (inside a parallel region: runs within its thread)"
            mode = "serial"
        if mode == "simd" and (in_simd or not simd_safe(f)):
            note += " (runs as a plain loop)"
            mode = "serial"
        chain = [f]
        if mode == "threads":
            chain = collapsible(f)
            clause = f" collapse({len(chain)})" if len(chain) > 1 else ""
            if self.target.cores is not None:
                clause += f" num_threads({self.target.cores})"
            self.emit(f"#pragma omp parallel for schedule(static){clause}", depth)
        elif mode == "simd":
            lanes = self.target.vector_lanes
            self.emit("#pragma omp simd" + (f" simdlen({lanes})" if lanes is not None else ""), depth)
        for k, g in enumerate(chain):
            v = f"i{g.var}"
            lo, hi = const_value(g.lo, self.bound), const_value(g.hi, self.bound)
            if lo is not None and hi is not None:
                self.ranges[g.var] = (lo, hi)
            text = f"for (int64_t {v} = {self.index(g.lo)}; {v} < {self.index(g.hi)}; ++{v}) {{"
            self.emit(text + "  " + c_comment(note if k == 0 else f"{g.name}: collapsed"), depth + k)
        inner = chain[-1]
        self.body(inner.body, depth + len(chain), in_threads or mode == "threads", in_simd or mode == "simd")
        for k in reversed(range(len(chain))):
            self.emit("}", depth + k)
            self.ranges.pop(chain[k].var, None)

    def store(self, st: Store, depth: int) -> None:
        dt = self.dtypes.get(st.buf)
        if dt is None:
            raise LoweringError(f"store to {st.buf!r} outside its allocation", st.loc, "the program is malformed")
        self.emit(c_comment(f"S{st.sid} at line {st.loc.line}"), depth)
        target = self.ref(st.buf, st.index)
        value = self.expr(st.value)
        if st.accum is None:
            line = f"{target} = {convert(value, st.value.dtype, dt)};"
        else:
            if st.value.dtype != dt:
                raise LoweringError(f"update of {dt} buffer {st.buf} with a {st.value.dtype} value", st.loc,
                                    "cast the contribution to the accumulator's dtype")
            line = f"{{ int64_t o = {self.offset(st.buf, st.index)}; {self.names[st.buf]}[o] = " \
                   f"{binary(st.accum, f'{self.names[st.buf]}[o]', value, dt)}; }}"
        if st.atomic:
            self.emit("#pragma omp critical(tc_accum)", depth)
        self.emit(line, depth)

    # ------------------------------------------------------------------ the functions
    def count(self, shape: tuple[IExpr, ...]) -> str:
        """The number of cells of a buffer of ``shape`` (an ``int64_t`` expression)."""
        return " * ".join(f"tc_max({self.index(s)}, 0)" for s in shape) or "1"

    def pack_function(self, k: int, pk: Pack, sizes: list[str]) -> list[str]:
        """``void tc_pack_<k>(<constant inputs it reads>, <the pack>, <sizes>, int *err)``: the nest of
        hoisted pack ``pk`` filling the zeroed buffer it is given."""
        alloc = self.lp.body[pk.start]
        assert isinstance(alloc, Alloc)
        self.declare(alloc)
        params = [f"const {C_TYPES[self.dtypes[r]]} *restrict {self.names[r]}" for r in pk.reads]
        params += [f"{C_TYPES[alloc.dtype]} *restrict {self.names[pk.buf]}", *sizes, "int *restrict err"]
        kernel_lines, self.lines = self.lines, []
        self.body(self.lp.body[pk.start + 1:pk.stop], 1, False, False)
        nest, self.lines = self.lines, kernel_lines
        return [c_comment(f"hoisted pack {pk.buf} of kernel {self.lp.name}: computed once per identity of the "
                          "constant inputs it reads, into a zeroed buffer"),
                f"void {PACK_SYMBOL}{k}({', '.join(params)})", "{",
                *(f"    (void){self.sizes[s]};" for s in self.lp.sizes), "    (void)err;", *nest, "}", ""]

    def source(self) -> str:
        sizes = [f"int64_t {self.sizes[s]}" for s in self.lp.sizes]
        packs = [line for k, pk in enumerate(self.lp.packs) for line in self.pack_function(k, pk, sizes)]
        params = []
        for t in self.lp.tensors:
            const = "" if t.written else "const "
            params.append(f"{const}{C_TYPES[t.dtype]} *restrict {self.names[t.name]}")
        params += [f"const {C_TYPES[self.dtypes[pk.buf]]} *restrict {self.names[pk.buf]}" for pk in self.lp.packs]
        params += sizes
        params.append("int *restrict err")
        head = [prelude(), "", *packs, c_comment(f"kernel {self.lp.name}"),
                f"void {SYMBOL}({', '.join(params)})", "{"]
        for s in self.lp.sizes:
            head.append(f"    (void){self.sizes[s]};")
        self.in_kernel = True
        self.body(self.lp.kernel_body, 1, False, False)
        self.in_kernel = False
        tail = ["}", "", c_comment("round bf16 inputs in place, as the interpreter stores them"),
                "void tc_round_bf16(float *restrict x, int64_t n) { for (int64_t k = 0; k < n; ++k) "
                "x[k] = tc_bf16(x[k]); }", ""]
        return "\n".join(head + self.lines + tail)


def simd_safe(f: For) -> bool:
    """Whether ``omp simd`` may wrap ``f``: no atomics, heap buffers, threads or simd loops inside."""
    for node in walk(f.body):
        if isinstance(node, Store) and node.atomic:
            return False
        if isinstance(node, Alloc) and node.storage == "heap":
            return False
        if isinstance(node, For) and node.mode in ("threads", "simd"):
            return False
        if isinstance(node, Sync):
            return False
    return True


def collapsible(f: For) -> list[For]:
    """``f`` and the directly nested ``threads`` loops whose bounds do not read the loops above."""
    chain = [f]
    outer_vars = {f.var}
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For):
        g = chain[-1].body[0]
        if g.mode != "threads" or any(v in outer_vars for v, _ in free_vars(g.lo) | free_vars(g.hi)):
            break
        chain.append(g)
        outer_vars.add(g.var)
    return chain


# ----------------------------------------------------------------------------- element semantics
def literal(value, dtype: str) -> str:
    dt = dtype_of(dtype)
    if dt.is_bool:
        return "1" if value else "0"
    if dt.is_int:
        v = int(value)
        if dtype == "i64" and v == -2**63:
            return "INT64_MIN"
        return f"(({C_TYPES[dtype]}){v}{'LL' if dtype == 'i64' else ''})"
    return _float_literal(float(value), dtype)


def convert(x: str, src: str, dst: str) -> str:
    """The value ``x`` of dtype ``src`` as dtype ``dst`` (the storage rule of ``dst``)."""
    if src == dst:
        return x
    s, d = dtype_of(src), dtype_of(dst)
    if d.is_bool:
        return f"({x} != 0)"
    if dst == "bf16":
        if src in ("f64", "i32", "i64"):
            return f"tc_bf16_from_f64((double){x})"
        return f"tc_bf16((float){x})"
    if d.is_int and s.is_float:
        return f"(({C_TYPES[dst]})tc_f2i((double){x}))"
    return f"(({C_TYPES[dst]}){x})"


def unary(fn: str, x: str, src: str, dst: str) -> str:
    dt = dtype_of(src)
    if fn == "not":
        return f"(!{x})"
    if dt.is_int:
        if fn in ("neg", "abs"):
            return f"tc_{fn}_{src}({x})"
    elif dt.is_float:
        if fn == "neg":
            return f"(-{x})"
        if fn == "abs":
            return {"f64": f"fabs({x})", "f16": f"((_Float16)fabsf((float){x}))"}.get(src, f"fabsf({x})")
        if fn in _MATH:
            if src == "f64":
                return f"{_MATH[fn]}({x})"
            out = f"{_MATH[fn]}f((float){x})"
            return {"f16": f"((_Float16){out})", "bf16": f"tc_bf16({out})"}.get(src, out)
    raise LoweringError(f"`{fn}` on {src} has no C form", hint="see the DSL's typing rules for unary ops")


def binary(fn: str, a: str, b: str, dtype: str) -> str:
    """``a fn b`` for operands of ``dtype`` (comparisons and logic give an int 0/1)."""
    dt = dtype_of(dtype)
    if fn in _CMP:
        return f"({a} {_CMP[fn]} {b})"
    if fn in ("and", "or"):
        return f"({a} {'&&' if fn == 'and' else '||'} {b})"
    if dt.is_int and dtype in INT_TYPES:
        if fn in ("add", "sub", "mul", "min", "max"):
            return f"tc_{fn}_{dtype}({a}, {b})"
        if fn in ("floordiv", "mod"):
            return f"tc_{fn}_{dtype}({a}, {b}, err)"
    if dt.is_float:
        ops = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
        if fn in ops:
            if dtype == "f16":
                return f"((_Float16)((float){a} {ops[fn]} (float){b}))"
            out = f"({a} {ops[fn]} {b})"
            return f"tc_bf16{out}" if dtype == "bf16" else out
        if fn in ("min", "max"):
            if dtype == "f64":
                return f"tc_f{fn}_d({a}, {b})"
            out = f"tc_f{fn}_f((float){a}, (float){b})"
            return f"((_Float16){out})" if dtype == "f16" else out
    raise LoweringError(f"`{fn}` on {dtype} has no C form", hint="see the DSL's typing rules for binary ops")


def emit_c(lp: Lowered, target: Target = DEFAULT_TARGET) -> str:
    """The C source of lowered program ``lp`` for the host of ``target`` (its cores and vector width)."""
    return Emitter(lp, target).source()


def standalone_main(lp: Lowered, packs: tuple[Pack, ...] = ()) -> str:
    """A ``main`` for sanitizer builds: ``prog DIR`` reads ``DIR/sizes`` (int64 each) and ``DIR/t<k>``
    (raw tensor k; bf16 values are rounded), computes the hoisted ``packs`` the source has functions
    for (``tc_pack_<k>``, into zeroed buffers), runs the kernel, writes the written tensors back and
    the error flag to ``DIR/err``."""
    n = len(lp.tensors)
    lines = [
        "#include <stdio.h>",
        "static void *tc_read(const char *dir, const char *name, long *len) {",
        "    char path[4096]; snprintf(path, sizeof path, \"%s/%s\", dir, name);",
        "    FILE *f = fopen(path, \"rb\"); if (!f) return NULL;",
        "    fseek(f, 0, SEEK_END); *len = ftell(f); fseek(f, 0, SEEK_SET);",
        "    void *p = malloc((size_t)*len + 1); if (p && fread(p, 1, (size_t)*len, f) != (size_t)*len) { free(p); p = NULL; }",
        "    fclose(f); return p;",
        "}",
        "static int tc_write(const char *dir, const char *name, const void *p, long len) {",
        "    char path[4096]; snprintf(path, sizeof path, \"%s/%s\", dir, name);",
        "    FILE *f = fopen(path, \"wb\"); if (!f) return 1;",
        "    int bad = fwrite(p, 1, (size_t)len, f) != (size_t)len; fclose(f); return bad;",
        "}",
        "int main(int argc, char **argv) {",
        "    if (argc != 2) return 64;",
        f"    void *t[{max(n, 1)}]; long len[{max(n, 1)}]; long slen = 0;",
        "    int64_t *s = (int64_t *)tc_read(argv[1], \"sizes\", &slen); if (!s) return 66;",
    ]
    for k in range(n):
        lines.append(f"    t[{k}] = tc_read(argv[1], \"t{k}\", &len[{k}]); if (!t[{k}]) return 66;")
    args = [f"({C_TYPES[tl.dtype]} *)t[{k}]" for k, tl in enumerate(lp.tensors)]
    size_args = [f"s[{k}]" for k in range(len(lp.sizes))]
    for k, tl in enumerate(lp.tensors):
        if tl.dtype == "bf16":
            lines.append(f"    tc_round_bf16((float *)t[{k}], len[{k}] / 4);")
    lines.append("    int err_flag = 0; int *err = &err_flag;")
    em = Emitter(lp)
    for k, name in enumerate(lp.sizes):
        lines.append(f"    const int64_t {em.sizes[name]} = s[{k}]; (void){em.sizes[name]};")
    tensor_arg = {tl.name: args[k] for k, tl in enumerate(lp.tensors)}
    for k, pk in enumerate(packs):
        alloc = lp.body[pk.start]
        assert isinstance(alloc, Alloc)
        ctype = C_TYPES[alloc.dtype]
        lines.append(f"    {ctype} *p{k} = ({ctype} *)calloc((size_t)({em.count(alloc.shape)}) + 1, sizeof({ctype}));"
                     f" if (!p{k}) return 71;")
        call = [tensor_arg[r] for r in pk.reads] + [f"p{k}"] + size_args + ["err"]
        lines.append(f"    if (*err == 0) {PACK_SYMBOL}{k}({', '.join(call)});")
    call = args + [f"p{k}" for k in range(len(packs))] + size_args + ["err"]
    lines.append(f"    if (*err == 0) {SYMBOL}({', '.join(call)});")
    for k, tl in enumerate(lp.tensors):
        if tl.written:
            lines.append(f"    if (tc_write(argv[1], \"t{k}\", t[{k}], len[{k}])) return 74;")
    lines.append("    if (tc_write(argv[1], \"err\", err, sizeof *err)) return 74;")
    for k in range(n):
        lines.append(f"    free(t[{k}]);")
    for k in range(len(packs)):
        lines.append(f"    free(p{k});")
    lines += ["    free(s);", "    return 0;", "}", ""]
    return "\n".join(lines)
