"""The 16-bit float dtypes of inputs.yaml, ``bf16`` and ``half`` (fp16): storage, conversions, C helpers.

A buffer of either dtype is stored as its 16-bit patterns: numpy ``uint16`` for bf16 (numpy has
no bfloat16) and numpy ``float16`` for half; the device and the data files hold the same bytes.
Kernels see CUDA's types (``__nv_bfloat16``, ``__half``). Where a reference or a generator
computes, the values are converted here, one rule for all of them: decoding is exact (every
bf16 and half value is a float32), encoding rounds to nearest even, keeps NaN a NaN and
overflows to infinity.

- python references get float32 arrays of the values and may return any numbers (or torch
  tensors, bf16 ones included), which are encoded;
- C references (and ``inputs.hpp`` on the host) see ``uint16_t`` bit patterns and get the
  helpers of ``C_HELPERS`` (``ktt_bf16_to_float`` ...);
- ``init: custom`` generators return ``std::vector<ktt_bf16>`` / ``std::vector<ktt_half>``,
  two-byte types that convert from and to float (``CXX_TYPES``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

HALF_DTYPES = frozenset({"bf16", "half"})
DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "half", "fp16": "half"}  # inputs.yaml spellings -> dtype
FINITE_MAX = {"bf16": (2 - 2.0**-7) * 2.0**127, "half": 65504.0}  # the largest finite values
# What a poisoned 16-bit float buffer holds in every element: a quiet NaN as bf16 and as half.
POISON16 = 0x7FAD
GENERATOR_CTYPES = {"bf16": "ktt_bf16", "half": "ktt_half"}
HOST_CTYPE = "uint16_t"


def encode(values: Any, dtype: str) -> np.ndarray:
    """Numbers (any numeric array) as the storage of ``dtype``, rounded to nearest even."""
    x = np.ascontiguousarray(values).astype(np.float32, copy=False).ravel()
    if dtype == "half":
        return x.astype(np.float16)
    u = x.view(np.uint32)
    with np.errstate(over="ignore"):
        bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    bits[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
    return bits


def decode(stored: np.ndarray, dtype: str) -> np.ndarray:
    """The float32 values of a storage array of ``dtype`` (exact)."""
    s = np.ascontiguousarray(stored).ravel()
    if dtype == "half":
        return s.view(np.float16).astype(np.float32)
    return (s.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def host_values(value: Any) -> Any:
    """A torch bf16 or half tensor as float32 (numpy cannot hold bf16); anything else unchanged."""
    if type(value).__module__.split(".")[0] == "torch" and str(getattr(value, "dtype", "")) in (
        "torch.bfloat16",
        "torch.float16",
    ):
        return value.float()
    return value


# C (C11) and C++: the conversions a C reference and a generator use. No headers but
# <stdint.h> and <string.h>, included before it.
C_HELPERS = r"""static inline float ktt_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t ktt_float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);               /* nearest even */
}
static inline float ktt_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    float f;
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact */
        f = (float)m * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    u = e == 0x1fu ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112u) << 23) | (m << 13));
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t ktt_float_to_half(float f) {
    uint32_t u, a, sign, m, r, rest, halfway;
    int shift;
    memcpy(&u, &f, 4);
    sign = (u >> 16) & 0x8000u;
    a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* 65520 and above round to infinity */
    if (a >= 0x38800000u) return (uint16_t)(sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13));
    if (a <= 0x33000000u) return (uint16_t)sign; /* 2^-25 and below round to zero */
    m = (a & 0x7fffffu) | 0x800000u;             /* a subnormal half: m * 2^(e - 150) in units of 2^-24 */
    shift = 126 - (int)(a >> 23);
    r = m >> shift;
    rest = m & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (r & 1u))) r++;
    return (uint16_t)(sign | r);
}
"""

CXX_TYPES = r"""// bf16 and half elements of init: custom generators: two bytes, converted from and to float.
struct ktt_bf16 {
    uint16_t bits;
    ktt_bf16() : bits(0) {}
    ktt_bf16(float f) : bits(ktt_float_to_bf16(f)) {}
    operator float() const { return ktt_bf16_to_float(bits); }
};
struct ktt_half {
    uint16_t bits;
    ktt_half() : bits(0) {}
    ktt_half(float f) : bits(ktt_float_to_half(f)) {}
    operator float() const { return ktt_half_to_float(bits); }
};
static_assert(sizeof(ktt_bf16) == 2 && sizeof(ktt_half) == 2, "16-bit elements");
"""
