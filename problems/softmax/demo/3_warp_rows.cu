// softmax, branch "warp-row", iteration 1: one warp per row, WARPS rows per block.
// The warp keeps running (max, sum) pairs over its row read as float4 (online softmax), merges
// them with a shuffle butterfly, and writes exp(x - max) / sum in a second sweep. No shared
// memory and no __syncthreads: a row is the business of one warp.
#include "inputs.hpp"

#define LOWEST (-3.402823466e38f)  // the most negative finite float: exp(LOWEST - m) is 0, never NaN

__device__ __forceinline__ void absorb(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else {
        s += expf(v - m);
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
softmax_warp_rows(const float* __restrict__ X, float* __restrict__ Y) {
    const int row = blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31;
    if (row >= ROWS) return;  // the whole warp leaves together
    const float4* x = reinterpret_cast<const float4*>(X + (size_t)row * COLS);
    float4* y = reinterpret_cast<float4*>(Y + (size_t)row * COLS);

    float m = LOWEST, s = 0.0f;
#pragma unroll 4
    for (int c = lane; c < COLS / 4; c += 32) {
        const float4 v = __ldg(&x[c]);
        absorb(m, s, v.x);
        absorb(m, s, v.y);
        absorb(m, s, v.z);
        absorb(m, s, v.w);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        const float top = fmaxf(m, m2);
        s = s * expf(m - top) + s2 * expf(m2 - top);
        m = top;
    }

    const float inv = 1.0f / s;
#pragma unroll 4
    for (int c = lane; c < COLS / 4; c += 32) {
        const float4 v = __ldg(&x[c]);
        y[c] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
}
