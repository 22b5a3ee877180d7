"""Checks that run on the GPU: output vs reference, canaries, input mutation, run-to-run drift.

Reading a 16 MB output back to the host and comparing it in numpy costs more than the
kernel under test; these small kernels compare in place and return a few counters. Each
check owns a slot of 8 counters in one device array; all slots are read back at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ktt.device import Gpu, KernelParams
from ktt.half_types import HALF_DTYPES, POISON16

POISON32 = 0x7FF8DEAD  # a quiet NaN as float, and as each half of a double; a sentinel for int
POISON16X2 = POISON16 * 0x10001  # a quiet NaN as bf16 and as half in both halves of the word
CANARY32 = 0x5AFEC0DE
SLOT = 8
MAX_SLOTS = 64
BLOCK = 256

SOURCE = r"""
typedef unsigned long long u64;
#define KTT_POISON32 0x7FF8DEADu
#define KTT_POISON64 0x7FF8DEAD7FF8DEADull
#define KTT_POISON16 0x7FADu  // ktt.half_types.POISON16

// The 16-bit floats, as their bit patterns (no CUDA header needed): decoded exactly to float.
struct ktt_bf16 { unsigned short bits; };
struct ktt_f16 { unsigned short bits; };
__device__ __forceinline__ float ktt_value(ktt_bf16 v) { return __uint_as_float((unsigned)v.bits << 16); }
__device__ __forceinline__ float ktt_value(ktt_f16 v) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.bits));
    return f;
}
template <typename T> __device__ __forceinline__ T ktt_value(T v) { return v; }

__device__ __forceinline__ u64 ktt_warp_sum(u64 v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ u64 ktt_warp_min(u64 v) {
    for (int o = 16; o > 0; o >>= 1) { u64 w = __shfl_down_sync(0xffffffffu, v, o); v = w < v ? w : v; }
    return v;
}
__device__ __forceinline__ u64 ktt_warp_max(u64 v) {
    for (int o = 16; o > 0; o >>= 1) { u64 w = __shfl_down_sync(0xffffffffu, v, o); v = w > v ? w : v; }
    return v;
}
__device__ __forceinline__ void ktt_flush(u64* s, u64 bad, u64 first, u64 maxbits, u64 unwritten, u64 nonfinite) {
    bad = ktt_warp_sum(bad); first = ktt_warp_min(first); maxbits = ktt_warp_max(maxbits);
    unwritten = ktt_warp_sum(unwritten); nonfinite = ktt_warp_sum(nonfinite);
    if ((threadIdx.x & 31) == 0) {
        if (bad) atomicAdd(&s[0], bad);
        if (first != ~0ull) atomicMin(&s[1], first);
        if (maxbits) atomicMax(&s[2], maxbits);
        if (unwritten) atomicAdd(&s[3], unwritten);
        if (nonfinite) atomicAdd(&s[4], nonfinite);
    }
}

// The poison is the 32-bit word KTT_POISON32 repeated: element i of a narrower type holds its
// (i mod 4)-th byte (or (i mod 2)-th half).
__device__ __forceinline__ bool ktt_poison(float v, u64) { return __float_as_uint(v) == KTT_POISON32; }
__device__ __forceinline__ bool ktt_poison(double v, u64) { return (u64)__double_as_longlong(v) == KTT_POISON64; }
__device__ __forceinline__ bool ktt_poison(int v, u64) { return (unsigned)v == KTT_POISON32; }
__device__ __forceinline__ bool ktt_poison(long long v, u64) { return (u64)v == KTT_POISON64; }
__device__ __forceinline__ bool ktt_poison(short v, u64 i) {
    return (unsigned short)v == (unsigned short)(KTT_POISON32 >> (16 * (i & 1)));
}
__device__ __forceinline__ bool ktt_poison(signed char v, u64 i) {
    return (unsigned char)v == (unsigned char)(KTT_POISON32 >> (8 * (i & 3)));
}
// A 16-bit float buffer is poisoned with a NaN in every element (not a value a kernel may compute).
__device__ __forceinline__ bool ktt_poison(ktt_bf16 v, u64) { return v.bits == KTT_POISON16; }
__device__ __forceinline__ bool ktt_poison(ktt_f16 v, u64) { return v.bits == KTT_POISON16; }
__device__ __forceinline__ bool ktt_finite(float v) { return isfinite(v); }
__device__ __forceinline__ bool ktt_finite(double v) { return isfinite(v); }
__device__ __forceinline__ bool ktt_finite(ktt_bf16 v) { return isfinite(ktt_value(v)); }
__device__ __forceinline__ bool ktt_finite(ktt_f16 v) { return isfinite(ktt_value(v)); }
template <typename T> __device__ __forceinline__ bool ktt_finite(T) { return true; }  // the integer types
__device__ __forceinline__ bool ktt_same(float a, float b) { return __float_as_uint(a) == __float_as_uint(b); }
__device__ __forceinline__ bool ktt_same(double a, double b) {
    return __double_as_longlong(a) == __double_as_longlong(b);
}
__device__ __forceinline__ bool ktt_same(ktt_bf16 a, ktt_bf16 b) { return a.bits == b.bits; }
__device__ __forceinline__ bool ktt_same(ktt_f16 a, ktt_f16 b) { return a.bits == b.bits; }
template <typename T> __device__ __forceinline__ bool ktt_same(T a, T b) { return a == b; }  // the integer types

// init: the buffer's init data, or null when it was poisoned. A bad element that still holds
// its init data (or the poison) is counted as unwritten. The poison pattern is only looked for
// when the buffer was poisoned: under init data it is an ordinary value. The error is taken on the
// decoded values (a 16-bit float as its exact float value).
template <typename T>
__device__ void ktt_compare(const T* out, const T* ref, const T* init, u64 n, double tol, double rtol, u64* s) {
    u64 bad = 0, first = ~0ull, maxbits = 0, unwritten = 0, nonfinite = 0;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        T o = out[i];
        T r = ref[i];
        bool is_bad = false;
        if (init == nullptr && ktt_poison(o, i)) { unwritten++; is_bad = true; }
        else if (!ktt_finite(o)) { nonfinite++; is_bad = true; }
        else {
            double rv = (double)ktt_value(r);
            double e = fabs((double)ktt_value(o) - rv);
            if (!(e <= tol + rtol * fabs(rv))) is_bad = true;  // rtol 0: the original's absolute test
            if (e == e) { u64 b = (u64)__double_as_longlong(e); maxbits = b > maxbits ? b : maxbits; }
        }
        if (is_bad && init != nullptr && ktt_same(o, init[i])) unwritten++;
        if (is_bad) { bad++; first = i < first ? i : first; }
    }
    ktt_flush(s, bad, first, maxbits, unwritten, nonfinite);
}

extern "C" __global__ void ktt_compare_f32(const float* o, const float* r, const float* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_f64(const double* o, const double* r, const double* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_bf16(const ktt_bf16* o, const ktt_bf16* r, const ktt_bf16* init, u64 n,
                                            double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_f16(const ktt_f16* o, const ktt_f16* r, const ktt_f16* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_i32(const int* o, const int* r, const int* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_i8(const signed char* o, const signed char* r, const signed char* init, u64 n,
                                          double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_i16(const short* o, const short* r, const short* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}
extern "C" __global__ void ktt_compare_i64(const long long* o, const long long* r, const long long* init, u64 n,
                                           double tol, double rtol, u64* s) {
    ktt_compare(o, r, init, n, tol, rtol, s);
}

// Words of a that differ from b (mutation, drift between runs).
extern "C" __global__ void ktt_diff_words(const unsigned* a, const unsigned* b, u64 n, u64* s) {
    u64 bad = 0, first = ~0ull;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        if (a[i] != b[i]) { bad++; first = i < first ? i : first; }
    ktt_flush(s, bad, first, 0, 0, 0);
}

// Words of a that are not v (a changed canary is an out-of-bounds write).
extern "C" __global__ void ktt_not_value(const unsigned* a, u64 n, unsigned v, u64* s) {
    u64 bad = 0, first = ~0ull;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        if (a[i] != v) { bad++; first = i < first ? i : first; }
    ktt_flush(s, bad, first, 0, 0, 0);
}

// Keeps every SM busy for a while, so clocks are up before the first measurement.
extern "C" __global__ void ktt_busy(float* sink, int iterations) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f;
    for (int i = 0; i < iterations; ++i) a = fmaf(a, b, 1e-7f);
    if (a == 12345.678f) sink[0] = a;
}
"""

COMPARE_KERNELS = {
    "float": "ktt_compare_f32",
    "double": "ktt_compare_f64",
    "int": "ktt_compare_i32",
    "char": "ktt_compare_i8",
    "short": "ktt_compare_i16",
    "long": "ktt_compare_i64",
    "bf16": "ktt_compare_bf16",
    "half": "ktt_compare_f16",
}


def poison_word(dtype: str) -> int:
    """The 32-bit word a poisoned buffer of ``dtype`` is filled with."""
    return POISON16X2 if dtype in HALF_DTYPES else POISON32


@dataclass
class CheckResult:
    bad: int
    first: int | None
    max_abs_error: float | None
    unwritten: int
    nonfinite: int


class GpuChecks:
    def __init__(self, gpu: Gpu, cubin: bytes) -> None:
        self.gpu = gpu
        self.module = gpu.load_module(cubin)
        names = [*COMPARE_KERNELS.values(), "ktt_diff_words", "ktt_not_value", "ktt_busy"]
        self.fn = {n: gpu.function(self.module, n) for n in names}
        self.stats = gpu.alloc(MAX_SLOTS * SLOT * 8)
        self.host = gpu.pinned(MAX_SLOTS * SLOT * 8, np.uint64)
        self.used = 0
        self.grid_cap = gpu.props.sm_count * 8

    def begin(self) -> None:
        """Reset every slot: counters to 0, 'first' to all ones."""
        self.used = 0
        self.gpu.memset32(self.stats, 0, MAX_SLOTS * SLOT * 2)

    def _slot(self) -> int:
        if self.used >= MAX_SLOTS:
            raise RuntimeError("too many checks in one batch")
        slot = self.used
        self.used += 1
        self.gpu.memset32(self.stats + (slot * SLOT + 1) * 8, 0xFFFFFFFF, 2)
        return slot

    def _grid(self, n: int) -> tuple[int, int, int]:
        return (max(1, min(self.grid_cap, (n + BLOCK - 1) // BLOCK)), 1, 1)

    def compare(
        self, dtype: str, out: int, ref: int, n: int, tol: float, init: int | None = None, rtol: float = 0.0
    ) -> int:
        """``init``: the device copy of the buffer's init data (None when it was poisoned); an element
        passes when |out - ref| <= tol + rtol * |ref| (validation.rtol; 0: the absolute test)."""
        slot = self._slot()
        params = KernelParams(
            [
                ("ptr", out),
                ("ptr", ref),
                ("ptr", init or 0),
                ("u64", n),
                ("double", tol),
                ("double", rtol),
                ("ptr", self.stats + slot * SLOT * 8),
            ]
        )
        self.gpu.launch(self.fn[COMPARE_KERNELS[dtype]], self._grid(n), (BLOCK, 1, 1), 0, None, params)
        return slot

    def diff_words(self, a: int, b: int, nwords: int) -> int:
        slot = self._slot()
        params = KernelParams([("ptr", a), ("ptr", b), ("u64", nwords), ("ptr", self.stats + slot * SLOT * 8)])
        self.gpu.launch(self.fn["ktt_diff_words"], self._grid(nwords), (BLOCK, 1, 1), 0, None, params)
        return slot

    def not_value(self, a: int, nwords: int, value: int) -> int:
        slot = self._slot()
        params = KernelParams([("ptr", a), ("u64", nwords), ("u32", value), ("ptr", self.stats + slot * SLOT * 8)])
        self.gpu.launch(self.fn["ktt_not_value"], self._grid(nwords), (BLOCK, 1, 1), 0, None, params)
        return slot

    def collect(self) -> None:
        """Copy every slot back (waits for the device)."""
        self.gpu.d2h(self.host, self.stats)
        self.gpu.sync()

    def result(self, slot: int) -> CheckResult:
        s = self.host[slot * SLOT : slot * SLOT + SLOT]
        first = int(s[1])
        maxerr = float(np.array([s[2]], np.uint64).view(np.float64)[0]) if int(s[2]) else 0.0
        if not np.isfinite(maxerr):
            maxerr_out: float | None = None
        else:
            maxerr_out = maxerr
        return CheckResult(int(s[0]), None if first == 0xFFFFFFFFFFFFFFFF else first, maxerr_out, int(s[3]), int(s[4]))

    def busy(self, sink: int, iterations: int) -> None:
        params = KernelParams([("ptr", sink), ("int", iterations)])
        self.gpu.launch(self.fn["ktt_busy"], (self.gpu.props.sm_count * 8, 1, 1), (256, 1, 1), 0, None, params)
