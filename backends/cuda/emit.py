"""Lowered loop program -> CUDA C++ source: ``__global__`` kernels and a host launcher.

The launcher is ``void tc_kernel(<host tensor pointers>, <sizes>, int *err)``, the signature
of the C backend's function: it copies the tensors to the device, runs the host code of
``plan`` (its loops, guards, device allocations and launches, each launch checked and
synchronized), copies the written tensors back and merges the device's error flag into
``*err``. A failed CUDA call prints ``tilecert: CUDA error <code>: <text>`` on stderr and
sets ``*err`` to ``ERR_CUDA + code``; a launch geometry beyond the target's limits
(``semantics.bindings.Target``, rendered into the source) sets ``ERR_GEOMETRY``.

Each kernel takes the device tensors, the device allocations in scope, every size, the
host loop variables in scope and the device error flag. Inside it, grid loops read
``blockIdx``, thread loops ``threadIdx`` (``plan.Launch``), shared allocations are
``__shared__`` arrays (``semantics.launch.placement``; their bytes per kernel are summed
by ``semantics.launch.shared_bytes`` and bounded by the target's static limit), private ones
local arrays, the program's block / warp barriers are ``__syncthreads()`` / ``__syncwarp()``
(the emitter inserts none: the lowering pipeline's barrier pass placed them, and a statement
outside the thread loops of a kernel is refused), and updates the lowering marks atomic are
compare-and-swap loops. An asynchronous copy (``Store.async_copy``, the lowered ``loopir.AsyncCopy``) of a
tensor element into a ``__shared__`` buffer whose element has 4, 8 or 16 bytes is ``tc_cp_async<bytes>``:
``cp.async.ca.shared.global`` where the device has it (``__CUDA_ARCH__ >= 800``), its zero-fill form (src-size 0,
nothing read) for the ``Sel(c, load, 0)`` of a guarded element, and the synchronous copy on an older device; any
other (a converted or computed value, a 1- or 2-byte element) is the plain store. A ``Sync`` with ``pending``
(the lowered ``loopir.AsyncWait``) is ``tc_cp_async_commit()`` (``cp.async.commit_group``),
``tc_cp_async_wait<pending>()`` (``cp.async.wait_group``), then ``__syncthreads()``. Hoisted constant packs (``Lowered.packs``) are rendered as ordinary
code: a pack's buffer is a zeroed top-level device allocation and its nest runs before the
kernel proper on every call of the launcher. Element and index arithmetic are the C backend's (its ``Emitter``
and helper prelude, made ``__host__ __device__``), so results are bit-identical to it where
the order of operations is; so is the physical offset of every access of a swizzled buffer
(``Emitter.offset``). ``f16`` has no device type here (``CudaUnsupported``).

The source compiles with nvcc, and with g++ against the host emulation header
(``tc_cuda_emu.h``, which defines ``TC_CUDA_EMULATION`` and ``TC_LAUNCH``).
"""
from __future__ import annotations

import math
from typing import Optional

from tilecert.backends.c.emit import C_TYPES, Emitter, binary
from tilecert.backends.c.prelude import prelude
from tilecert.backends.text import c_comment, c_ident
from tilecert.lowering.program import Alloc, For, Guard, Lowered, Node, Seq, Store, Sync, walk
from tilecert.semantics import launch as G
from tilecert.semantics import loopir as L
from tilecert.semantics.bindings import DEFAULT_TARGET, Target
from tilecert.semantics.dtypes import dtype_of
from tilecert.semantics.index import IConst, IExpr

from .errors import CudaUnsupported
from .plan import HostAlloc, HostGuard, HostItem, HostLoop, HostSeq, Launch, Level, Path, plan, refused, site_of, thread_dim

ERR_CUDA = 1 << 20  # + the cudaError_t code
ERR_GEOMETRY = 3
GRID = {"grid0": "x", "grid1": "y", "grid2": "z"}
BARRIER = {"block": "__syncthreads();", "warp": "__syncwarp();"}

_HEAD = r"""#ifndef TC_CUDA_EMULATION
#include <cuda_runtime.h>
#define TC_LAUNCH(kernel, grid, block, ...) kernel<<<grid, block>>>(__VA_ARGS__)
#endif
#include <stdio.h>
"""

_RUNTIME = r"""
#define TC_ERR_CUDA %(cuda)d
#define TC_ERR_GEOMETRY %(geometry)d

/* a read-modify-write of one cell, atomic by compare-and-swap on its 4 or 8 bytes */
template <int N> struct tc_word;
template <> struct tc_word<4> { typedef unsigned int type; };
template <> struct tc_word<8> { typedef unsigned long long type; };
template <typename T, typename F> __device__ inline void tc_atomic_update(T *p, F update) {
    typedef typename tc_word<sizeof(T)>::type W;
    W seen, prev = 0;
    do {
        seen = prev;
        T cur, next;
        memcpy(&cur, &seen, sizeof(T));
        next = update(cur);
        W word;
        memcpy(&word, &next, sizeof(T));
        prev = atomicCAS((W *)p, seen, word);
    } while (prev != seen);
}

struct tc_device_buffer {
    void *p = nullptr;
    ~tc_device_buffer() { if (p) cudaFree(p); }
};
static bool tc_ok(cudaError_t e, int *err) {
    if (e == cudaSuccess) return true;
    fprintf(stderr, "tilecert: CUDA error %%d: %%s\n", (int)e, cudaGetErrorString(e));
    if (*err == 0) *err = TC_ERR_CUDA + (int)e;
    return false;
}
/* a zeroed device buffer of `bytes` bytes */
static bool tc_alloc(tc_device_buffer &b, int64_t bytes, int *err) {
    size_t n = bytes > 0 ? (size_t)bytes : 1;
    return tc_ok(cudaMalloc(&b.p, n), err) && tc_ok(cudaMemset(b.p, 0, n), err);
}
/* 1: launch; 0: an empty grid, nothing to run; -1: beyond the target's limits (reported) */
static int tc_geometry(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, int64_t bz, int *err) {
    if (gx <= 0 || gy <= 0 || gz <= 0) return 0;
    if (gx > %(gx)dLL || gy > %(gy)dLL || gz > %(gz)dLL || bx > %(bx)dLL || by > %(by)dLL || bz > %(bz)dLL
        || bx * by * bz > %(threads)dLL) {
        fprintf(stderr, "tilecert: launch geometry grid (%%lld, %%lld, %%lld) block (%%lld, %%lld, %%lld) exceeds "
                "the CUDA limits\n", (long long)gx, (long long)gy, (long long)gz, (long long)bx, (long long)by,
                (long long)bz);
        if (*err == 0) *err = TC_ERR_GEOMETRY;
        return -1;
    }
    return 1;
}
/* async copies: cp.async on sm_80 and later, tc_cuda_emu.h on the host, a copy at once before sm_80 */
/* tc_cp_async<B>: B bytes from global src to shared dst, or B zero bytes (src-size 0, src not read) when !valid */
template <int B> __device__ inline void tc_cp_async(void *dst, const void *src, bool valid) {
#if defined(TC_CUDA_EMULATION)
    tc_emu::cp_async(dst, src, B, valid);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%%0], [%%1], %%2, %%3;\n" :: "r"(s), "l"(src), "n"(B), "r"(valid ? B : 0)
                 : "memory");
#else
    if (valid) memcpy(dst, src, B); else memset(dst, 0, B);
#endif
}
/* the copies this thread issued since its last commit become one group (cp.async.commit_group) */
__device__ inline void tc_cp_async_commit() {
#if defined(TC_CUDA_EMULATION)
    tc_emu::cp_async_commit();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* wait until at most N of this thread's groups are in flight (cp.async.wait_group N) */
template <int N> __device__ inline void tc_cp_async_wait() {
#if defined(TC_CUDA_EMULATION)
    tc_emu::cp_async_wait(N);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %%0;\n" :: "n"(N) : "memory");
#endif
}
/* round bf16 inputs in place, as the interpreter stores them */
static inline void tc_round_bf16(float *x, int64_t n) { for (int64_t k = 0; k < n; ++k) x[k] = tc_bf16(x[k]); }
"""


def thread_index(target: Target) -> dict[str, str]:
    """Per thread dimension: its coordinate of this thread."""
    w = target.warp_size
    return {"block0": "(int64_t)threadIdx.x", "block1": "(int64_t)threadIdx.y", "block2": "(int64_t)threadIdx.z",
            "lane": f"((int64_t)threadIdx.x % {w})", "warp": f"((int64_t)threadIdx.x / {w})"}


class CudaEmitter(Emitter):
    """The C backend's expression emitter, with CUDA statements, kernels and a launcher, for ``target``."""

    def __init__(self, lp: Lowered, target: Target = DEFAULT_TARGET) -> None:
        super().__init__(lp, target)
        self.raw = thread_index(target)
        self.items = plan(lp, target)[0]
        self.kernels: list[str] = []
        self.host_allocs: list[str] = []  # the device allocations in scope, by buffer name
        self.launch: Optional[Launch] = None
        self.shared_buffers: set[str] = set()  # the __shared__ allocations (their names are unique per kernel)

    # ------------------------------------------------------------------ kernel statements
    def nodes(self, nodes: tuple[Node, ...], depth: int, path: Path, level: Level, acts: tuple[str, ...]) -> None:
        assert self.launch is not None
        for k, node in enumerate(nodes):
            p = path + (k,)
            if isinstance(node, Sync):
                if node.pending is not None:
                    self.emit(f"tc_cp_async_commit(); tc_cp_async_wait<{node.pending}>();  "
                              + c_comment(f"async copies land: at most {node.pending} groups in flight"), depth)
                self.emit(BARRIER[node.scope] + "  " + c_comment(f"{node.scope} barrier"), depth)
            elif isinstance(node, Alloc):
                self.alloc(node, depth, p, level)
            elif not self.launch.plan.private(level) and thread_dim(node) is None:
                raise CudaUnsupported(f"a statement of {self.lp.name} runs at the block level of a kernel, "
                                      "outside its thread loops",
                                      "lower through lowering.pipeline.lower_for, whose barrier pass places "
                                      "representative threads and barriers")
            elif isinstance(node, Store):
                self.guarded(list(acts), depth, lambda d, st=node: self.update(st, d))
            elif thread_dim(node) is not None:
                self.thread_loop(node, depth, p, level, acts)
            else:
                self.control(node, depth, p, level, acts)

    def guarded(self, conds: list[str], depth: int, body) -> None:
        if conds:
            self.emit(f"if ({' && '.join(conds)}) {{", depth)
            body(depth + 1)
            self.emit("}", depth)
        else:
            body(depth)

    def control(self, node, depth: int, p: Path, level: Level, acts: tuple[str, ...]) -> None:
        """A serial loop, a guard or an unrolled copy: under the shadow flags, or as it stands."""
        assert self.launch is not None
        conds: list[str] = []
        if p not in self.launch.plan.synced and acts:
            conds, acts = list(acts), ()

        def body(d: int) -> None:
            if isinstance(node, Seq):
                self.emit("{ " + c_comment(node.label), d)
                self.nodes(node.body, d + 1, p, level, acts)
                self.emit("}", d)
                return
            if isinstance(node, Guard):
                self.emit(f"if ({self.index(node.cond)}) {{", d)
                self.nodes(node.body, d + 1, p, level, acts)
                self.emit("}", d)
                return
            v = f"i{node.var}"
            note = f"{node.name}: {node.kind}" + (f" bound to {node.binding} (runs serially)" if node.binding else "")
            self.emit(f"for (int64_t {v} = {self.index(node.lo)}; {v} < {self.index(node.hi)}; ++{v}) {{  "
                      + c_comment(note), d)
            self.nodes(node.body, d + 1, p, level, acts)
            self.emit("}", d)

        self.guarded(conds, depth, body)

    def thread_loop(self, node: For, depth: int, p: Path, level: Level, acts: tuple[str, ...]) -> None:
        assert self.launch is not None
        dim = thread_dim(node)
        v = node.var
        raw = self.raw[dim]
        checks = [] if node.lo == IConst(0) else [f"{self.index(node.lo)} <= r{v}"]
        if node.hi != self.launch.extents[dim]:
            checks.append(f"r{v} < {self.index(node.hi)}")
        inner = self.launch.plan.enter(node, level)
        self.emit("{  " + c_comment(f"{node.name}: {node.kind} bound to {dim}"), depth)
        self.emit(f"const int64_t r{v} = {raw};", depth + 1)
        if node.body and p in self.launch.plan.synced:  # every thread runs it: shadows follow the first iteration
            if checks:
                self.emit(f"const bool a{v} = {' && '.join(checks)};", depth + 1)
                self.emit(f"const int64_t i{v} = a{v} ? r{v} : {self.index(node.lo)};", depth + 1)
                acts = acts + (f"a{v}",)
            else:
                self.emit(f"const int64_t i{v} = r{v};", depth + 1)
            self.nodes(node.body, depth + 1, p, inner, acts)
        else:
            self.emit(f"const int64_t i{v} = r{v};", depth + 1)
            self.guarded(list(acts) + checks, depth + 1,
                         lambda d: self.nodes(node.body, d, p, inner, ()))
        self.emit("}", depth)

    def alloc(self, node: Alloc, depth: int, p: Path, level: Level) -> None:
        assert self.launch is not None
        site = site_of(node)
        try:
            size = G.cells(site)
            bound = self.launch.plan.shared.get(p)
            copies = 1 if bound is None else G.copies(self.launch.shape, site, bound)
        except G.LaunchRefusal as e:
            raise refused(e) from None
        self.declare(node)
        name, ctype = self.names[node.buf], C_TYPES[node.dtype]
        if bound is None:
            self.emit(f"{ctype} {name}[{size}] = {{}};  " + c_comment(f"{node.scope} {node.buf} (thread-private)"),
                      depth)
            return
        offset = "0"
        for d in self.launch.dims:
            if d in bound:
                n = self.launch.extent(d)
                offset = f"({offset} * {n} + {self.raw[d]})" if offset != "0" else self.raw[d]
        self.shared_buffers.add(node.buf)
        self.shared_bytes += G.shared_bytes(copies, size, dtype_of(node.dtype).itemsize)
        note = f"{node.scope} {node.buf}"
        if copies == 1:
            self.emit(f"__shared__ {ctype} {name}[{size}];  " + c_comment(note), depth)
        else:
            self.emit(f"__shared__ {ctype} {name}_s[{copies * size}];  " + c_comment(f"{note} ({copies} copies)"),
                      depth)
            self.emit(f"{ctype} *const {name} = {name}_s + {offset} * {size};", depth)

    def update(self, st: Store, depth: int) -> None:
        if st.async_copy and self.async_copy(st, depth):
            return
        if not st.atomic:
            self.store(st, depth)
            return
        dt = self.dtypes[st.buf]
        if dtype_of(dt).itemsize not in (4, 8):
            raise CudaUnsupported(f"atomic update of {dt} buffer {st.buf}: CUDA compare-and-swap needs 4 or 8 bytes",
                                  "accumulate in i32 / f32 (or wider) and cast afterwards")
        ctype = C_TYPES[dt]
        self.emit(c_comment(f"S{st.sid} at line {st.loc.line} (atomic)"), depth)
        self.emit(f"{{ const {ctype} tc_v = {self.expr(st.value)}; tc_atomic_update(&{self.ref(st.buf, st.index)}, "
                  f"[&]({ctype} tc_c) {{ return ({ctype}){binary(st.accum, 'tc_c', 'tc_v', dt)}; }}); }}", depth)

    def async_copy(self, st: Store, depth: int) -> bool:
        """Emit ``st`` as ``tc_cp_async`` when it is a copy of a tensor element (or its zero-fill ``Sel(c, load,
        0)``) into a ``__shared__`` buffer of the same dtype with 4, 8 or 16 bytes an element; whether it was."""
        got = copy_source(st.value)
        dt = self.dtypes[st.buf]
        tensors = {t.name for t in self.lp.tensors}
        if got is None or st.buf not in self.shared_buffers or got[0].buf not in tensors or got[0].dtype != dt \
                or C_BYTES[dt] not in CP_ASYNC_BYTES:
            return False
        src, cond = got
        self.emit(c_comment(f"S{st.sid} at line {st.loc.line} (async copy)"), depth)
        ptr = f"&{self.ref(src.buf, src.index)}"
        if cond is None:
            valid = "true"
        else:
            valid = f"(bool)({self.expr(cond)})"
            ptr = f"{valid} ? {ptr} : {self.names[src.buf]}"
        self.emit(f"tc_cp_async<{C_BYTES[dt]}>(&{self.ref(st.buf, st.index)}, {ptr}, {valid});", depth)
        return True

    # ------------------------------------------------------------------ kernels
    def kernel(self, k: Launch) -> str:
        self.launch = k
        self.shared_bytes = 0
        self.shared_buffers = set()
        # a kernel's buffers end with it
        scope = (dict(self.names), dict(self.dtypes), dict(self.shapes), dict(self.layouts))
        saved, self.lines = self.lines, []
        depth = 1
        for node in k.chain:
            if isinstance(node, Guard):
                self.emit(f"if ({self.index(node.cond)}) {{", depth)
            else:
                v, slot = f"i{node.var}", site_of(node).slot
                self.emit(f"const int64_t {v} = (int64_t)blockIdx.{GRID[slot]};  "
                          + c_comment(f"{node.name}: {node.kind} bound to {node.binding}"), depth)
                checks = [] if node.lo == IConst(0) else [f"{self.index(node.lo)} <= {v}"]
                if node.hi != k.grid[slot]:
                    checks.append(f"{v} < {self.index(node.hi)}")
                self.emit(f"if ({' && '.join(checks)}) {{" if checks else "{", depth)
            depth += 1
        self.nodes(k.inner, depth, k.inner_path, Level(frozenset()), ())
        for depth in range(len(k.chain), 0, -1):
            self.emit("}", depth)
        body, self.lines = self.lines, saved
        self.names, self.dtypes, self.shapes, self.layouts = scope
        limit = self.target.max_shared_bytes
        if self.shared_bytes > limit:
            raise CudaUnsupported(f"kernel {k.index} of {self.lp.name} needs {self.shared_bytes} bytes of shared memory "
                                  f"(the static limit is {limit})", "use smaller tiles", "hardware_limits")
        return "\n".join([f"extern \"C\" __global__ void {self.kernel_name(k)}({', '.join(self.kernel_params(k))})", "{"]
                         + body
                         + ["}", ""])

    def kernel_name(self, k: Launch) -> str:
        return c_ident("tc_k", self.lp.name, k.index)

    def kernel_params(self, k: Launch) -> list[str]:
        params = []
        for t in self.lp.tensors:
            const = "" if t.written else "const "
            params.append(f"{const}{C_TYPES[t.dtype]} *__restrict__ {self.names[t.name]}")
        params += [f"{C_TYPES[self.dtypes[b]]} *{self.names[b]}" for b in self.host_allocs]
        params += [f"int64_t {self.sizes[s]}" for s in self.lp.sizes]
        params += [f"int64_t i{v}" for v in k.host_vars]
        return params + ["int *err"]

    # ------------------------------------------------------------------ host code
    def host(self, items: tuple[HostItem, ...], depth: int) -> None:
        declared = len(self.host_allocs)
        for item in items:
            if isinstance(item, Launch):
                self.kernels.append(self.kernel(item))
                self.launch_call(item, depth)
            elif isinstance(item, HostAlloc):
                node = item.node
                self.declare(node)
                name, ctype = self.names[node.buf], C_TYPES[node.dtype]
                count = " * ".join(f"tc_max({self.index(s)}, 0)" for s in node.shape) or "1"
                self.emit(f"tc_device_buffer {name}_d;  " + c_comment(f"{node.scope} {node.buf} (device memory)"),
                          depth)
                self.emit(f"if (!tc_alloc({name}_d, {count} * (int64_t)sizeof({ctype}), err)) return 1;", depth)
                self.emit(f"{ctype} *const {name} = ({ctype} *){name}_d.p;", depth)
                self.host_allocs.append(node.buf)
            elif isinstance(item, HostLoop):
                f = item.node
                self.emit(f"for (int64_t i{f.var} = {self.index(f.lo)}; i{f.var} < {self.index(f.hi)}; ++i{f.var}) "
                          "{  " + c_comment(f"{f.name}: {f.kind}, host loop"), depth)
                self.host(item.body, depth + 1)
                self.emit("}", depth)
            elif isinstance(item, HostGuard):
                self.emit(f"if ({self.index(item.node.cond)}) {{", depth)
                self.host(item.body, depth + 1)
                self.emit("}", depth)
            elif isinstance(item, HostSeq):
                self.emit("{ " + c_comment(item.node.label), depth)
                self.host(item.body, depth + 1)
                self.emit("}", depth)
        del self.host_allocs[declared:]

    def launch_call(self, k: Launch, depth: int) -> None:
        grid, block = ([self.index(e) for e in dims] for dims in k.launch_dims())
        args = [self.names[t.name] for t in self.lp.tensors] + [self.names[b] for b in self.host_allocs]
        args += [self.sizes[s] for s in self.lp.sizes]
        args += [f"i{v}" for v in k.host_vars] + ["tc_derr"]
        self.emit("{  " + c_comment(f"launch {k.index}"), depth)
        self.emit(f"const int64_t g[3] = {{{', '.join(grid)}}}, b[3] = {{{', '.join(block)}}};", depth + 1)
        self.emit("const int go = tc_geometry(g[0], g[1], g[2], b[0], b[1], b[2], err);", depth + 1)
        self.emit("if (go < 0) return 1;", depth + 1)
        self.emit("if (go > 0) {", depth + 1)
        self.emit(f"TC_LAUNCH({self.kernel_name(k)}, dim3((unsigned)g[0], (unsigned)g[1], (unsigned)g[2]), "
                  f"dim3((unsigned)b[0], (unsigned)b[1], (unsigned)b[2]), {', '.join(args)});", depth + 2)
        self.emit("if (!tc_ok(cudaGetLastError(), err) || !tc_ok(cudaDeviceSynchronize(), err)) return 1;", depth + 2)
        self.emit("}", depth + 1)
        self.emit("}", depth)

    def source(self, header: str) -> str:
        unsupported = [t.name for t in self.lp.tensors if t.dtype == "f16"] + \
            [n.buf for n in walk(self.lp.body) if isinstance(n, Alloc) and n.dtype == "f16"]
        if unsupported or any(_has_f16(n) for n in walk(self.lp.body)):
            raise CudaUnsupported(f"kernel {self.lp.name} uses f16 ({', '.join(unsupported) or 'in an expression'}), "
                                  "which has no device type in this backend", "use bf16 or f32")
        self.emit("tc_device_buffer tc_err_d;", 2)
        self.emit("if (!tc_alloc(tc_err_d, (int64_t)sizeof(int), err)) return 1;", 2)
        self.emit("int *const tc_derr = (int *)tc_err_d.p;", 2)
        for t in self.lp.tensors:
            name, ctype = self.names[t.name], C_TYPES[t.dtype]
            self.emit(f"tc_device_buffer {name}_d;", 2)
            self.emit(f"const int64_t {name}_n = {self.count(t.shape)} * (int64_t)sizeof({ctype});", 2)
            self.emit(f"if (!tc_alloc({name}_d, {name}_n, err)) return 1;", 2)
            self.emit(f"{ctype} *const {name} = ({ctype} *){name}_d.p;", 2)
            self.emit(f"if (!tc_ok(cudaMemcpy({name}, h_{name}, (size_t){name}_n, cudaMemcpyHostToDevice), err)) "
                      "return 1;", 2)
        self.host(self.items, 2)
        for t in self.lp.tensors:
            if t.written:
                name = self.names[t.name]
                self.emit(f"if (!tc_ok(cudaMemcpy(h_{name}, {name}, (size_t){name}_n, cudaMemcpyDeviceToHost), err)) "
                          "return 1;", 2)
        self.emit("int device_err = 0;", 2)
        self.emit("if (!tc_ok(cudaMemcpy(&device_err, tc_derr, sizeof(int), cudaMemcpyDeviceToHost), err)) return 1;",
                  2)
        self.emit("if (*err == 0) *err = device_err;", 2)
        self.emit("return 0;", 2)
        params = []
        for t in self.lp.tensors:
            const = "" if t.written else "const "
            params.append(f"{const}{C_TYPES[t.dtype]} *h_{self.names[t.name]}")
        params += [f"int64_t {self.sizes[s]}" for s in self.lp.sizes] + ["int *err"]
        launcher = [c_comment(f"host launcher of {self.lp.name}"), f"void tc_kernel({', '.join(params)})", "{"]
        launcher += [f"    (void){self.sizes[s]};" for s in self.lp.sizes]
        launcher += ["    *err = 0;", "    auto run = [&]() -> int {"] + self.lines + ["    };", "    run();", "}", ""]
        if any(isinstance(n, Store) and n.async_copy for n in walk(self.lp.body)):
            header += c_comment(ASYNC_NOTE) + "\n"
        head = [header + _HEAD, prelude("static __host__ __device__ inline"),
                _RUNTIME % {"cuda": ERR_CUDA, "geometry": ERR_GEOMETRY, "threads": self.target.max_threads_per_block,
                            **dict(zip(("gx", "gy", "gz"), self.target.max_grid)),
                            **dict(zip(("bx", "by", "bz"), self.target.max_block))}]
        return "\n".join(head + self.kernels + launcher)


C_BYTES = {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "f16": 2, "i32": 4, "bf16": 4, "f32": 4, "i64": 8, "f64": 8}
"""The bytes of an element in its C type (``C_TYPES``: bf16 is stored as float)."""
CP_ASYNC_BYTES = (4, 8, 16)  # the copy sizes of cp.async
ASYNC_NOTE = "async copies: checked as landed at issue; each lands by its wait_group, counted from the plan (no obligation)"


def copy_source(e: L.SExpr) -> Optional[tuple[L.Ld, Optional[L.SExpr]]]:
    """``(load, None)`` for a load, ``(load, c)`` for ``Sel(c, load, 0)`` (a guarded element: zero where ``c`` is
    false); None for any other value."""
    if isinstance(e, L.Ld):
        return e, None
    if isinstance(e, L.Sel) and isinstance(e.a, L.Ld) and isinstance(e.b, L.Lit) and e.b.value == 0 \
            and math.copysign(1.0, float(e.b.value)) > 0:  # +0: the zero fill's bytes
        return e.a, e.cond
    return None


def _has_f16(node: Node) -> bool:
    if not isinstance(node, Store):
        return False

    def walk_expr(e: L.SExpr) -> bool:
        if e.dtype == "f16":
            return True
        return any(walk_expr(c) for c in (getattr(e, f, None) for f in ("x", "a", "b", "cond")) if c is not None)

    return walk_expr(node.value)


def emit_cuda(lp: Lowered, header: str, target: Target = DEFAULT_TARGET) -> str:
    """The CUDA source of lowered program ``lp`` for ``target``, after ``header`` (the comment block of
    what was proved)."""
    return CudaEmitter(lp, target).source(header)
