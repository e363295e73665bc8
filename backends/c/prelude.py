"""The C helpers every emitted kernel starts with: exact index arithmetic and element semantics.

- index arithmetic is int64; ``floordiv`` / ``mod`` round toward negative infinity (Python's
  rule), and a zero divisor sets the error flag instead of trapping;
- integer element arithmetic wraps (computed in the unsigned type of the same width);
- ``bf16`` values live in ``float`` and are rounded to the nearest bf16 (ties to even) after
  every operation; from ``double`` they are first narrowed to float by round-to-odd so the
  two roundings compose to one;
- float -> integer conversion truncates toward zero, maps NaN and infinities to 0 and wraps
  modulo 2**bits;
- float ``max`` / ``min`` are IEEE 754-2019 ``maximum`` / ``minimum``: NaN propagates,
  ``min(+0, -0) = -0`` and ``max(+0, -0) = +0`` in either order.
"""
from __future__ import annotations

ERR_DIV_ZERO = 1
ERR_NO_MEMORY = 2
ERROR_MESSAGES = {
    ERR_DIV_ZERO: ("integer floor division or modulo by zero", "guard the divisor"),
    ERR_NO_MEMORY: ("a heap buffer could not be allocated", "use smaller tiles or sizes"),
}

INT_TYPES = {"i8": ("int8_t", "uint8_t"), "i16": ("int16_t", "uint16_t"), "i32": ("int32_t", "uint32_t"),
             "i64": ("int64_t", "uint64_t"), "u8": ("uint8_t", "uint8_t")}

_HEAD = r"""#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#define TC_ERR_DIV_ZERO %(div)d
#define TC_ERR_NO_MEMORY %(mem)d

%(fn)s void tc_fail(int *err, int code) {
#ifdef __CUDA_ARCH__
    atomicExch(err, code);
#else
    __atomic_store_n(err, code, __ATOMIC_RELAXED);
#endif
}

/* index arithmetic: int64, floor semantics */
%(fn)s int64_t tc_min(int64_t a, int64_t b) { return a < b ? a : b; }
%(fn)s int64_t tc_max(int64_t a, int64_t b) { return a > b ? a : b; }
%(fn)s int64_t tc_floordiv(int64_t a, int64_t b, int *err) {
    if (b == 0) { tc_fail(err, TC_ERR_DIV_ZERO); return 0; }
    if (b == -1) return (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b;
    return (a %% b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
%(fn)s int64_t tc_mod(int64_t a, int64_t b, int *err) {
    if (b == 0) { tc_fail(err, TC_ERR_DIV_ZERO); return 0; }
    if (b == -1) return 0;
    int64_t r = a %% b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
/* by a positive constant: no check needed */
%(fn)s int64_t tc_floordiv_c(int64_t a, int64_t b) { int64_t q = a / b; return (a %% b < 0) ? q - 1 : q; }
%(fn)s int64_t tc_mod_c(int64_t a, int64_t b) { int64_t r = a %% b; return r < 0 ? r + b : r; }

/* bf16: float storage, round to nearest even after every operation */
%(fn)s float tc_bf16(float x) {
    if (x != x) return x;
    uint32_t u; memcpy(&u, &x, 4);
    u += 0x7FFFu + ((u >> 16) & 1u);
    u &= 0xFFFF0000u;
    memcpy(&x, &u, 4);
    return x;
}
%(fn)s float tc_f32_odd(double x) {
    float f = (float)x;
    double back = (double)f;
    if (back == x || x != x) return f;
    uint32_t u; memcpy(&u, &f, 4);
    if (fabs(back) > fabs(x)) u -= 1u;
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}
%(fn)s float tc_bf16_from_f64(double x) { return tc_bf16(tc_f32_odd(x)); }

/* float -> integer: truncate, NaN/inf -> 0, wrap modulo 2**64 (then to the width by the cast) */
%(fn)s int64_t tc_f2i(double x) {
    if (x != x || isinf(x)) return 0;
    double t = trunc(x);
    if (fabs(t) < 9223372036854775808.0) return (int64_t)t;
    double r = fmod(t, 18446744073709551616.0);
    if (r >= 9223372036854775808.0) r -= 18446744073709551616.0;
    else if (r < -9223372036854775808.0) r += 18446744073709551616.0;
    return (int64_t)r;
}
"""

_FLOAT_MINMAX = r"""
/* %(T)s max / min: IEEE 754-2019 maximum / minimum (NaN propagates; min(+0,-0) = -0, max(+0,-0) = +0) */
%(fn)s %(T)s tc_fmax_%(n)s(%(T)s a, %(T)s b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? b : a;
    return a > b ? a : b;
}
%(fn)s %(T)s tc_fmin_%(n)s(%(T)s a, %(T)s b) {
    if (a != a || b != b) return a + b;
    if (a == b) return signbit(a) ? a : b;
    return a < b ? a : b;
}
"""

_INT_OPS = r"""
%(fn)s %(T)s tc_add_%(n)s(%(T)s a, %(T)s b) { return (%(T)s)((%(U)s)a + (%(U)s)b); }
%(fn)s %(T)s tc_sub_%(n)s(%(T)s a, %(T)s b) { return (%(T)s)((%(U)s)a - (%(U)s)b); }
%(fn)s %(T)s tc_mul_%(n)s(%(T)s a, %(T)s b) { return (%(T)s)((%(W)s)a * (%(W)s)b); }
%(fn)s %(T)s tc_neg_%(n)s(%(T)s a) { return (%(T)s)(0u - (%(U)s)a); }
%(fn)s %(T)s tc_abs_%(n)s(%(T)s a) { return a < 0 ? tc_neg_%(n)s(a) : a; }
%(fn)s %(T)s tc_min_%(n)s(%(T)s a, %(T)s b) { return a < b ? a : b; }
%(fn)s %(T)s tc_max_%(n)s(%(T)s a, %(T)s b) { return a > b ? a : b; }
%(fn)s %(T)s tc_floordiv_%(n)s(%(T)s a, %(T)s b, int *err) { return (%(T)s)tc_floordiv(a, b, err); }
%(fn)s %(T)s tc_mod_%(n)s(%(T)s a, %(T)s b, int *err) { return (%(T)s)tc_mod(a, b, err); }
"""

# the unsigned type products are formed in: wide enough that the C promotion rules cannot overflow an int
_WIDE = {"i8": "uint32_t", "i16": "uint32_t", "i32": "uint32_t", "i64": "uint64_t", "u8": "uint32_t"}


def prelude(qualifier: str = "static inline") -> str:
    """The helper text (deterministic: part of every emitted source); ``qualifier`` declares each
    helper (the CUDA backend makes them ``__host__ __device__``)."""
    parts = [_HEAD % {"div": ERR_DIV_ZERO, "mem": ERR_NO_MEMORY, "fn": qualifier}]
    parts += [_FLOAT_MINMAX % {"T": t, "n": n, "fn": qualifier} for t, n in (("float", "f"), ("double", "d"))]
    for name, (t, u) in INT_TYPES.items():
        parts.append(_INT_OPS % {"T": t, "U": u, "W": _WIDE[name], "n": name, "fn": qualifier})
    return "".join(parts)
