// softmax, branch "block-row", iteration 2: one block per row, two sweeps instead of three.
// Sweep 1 keeps a running (max, sum) pair per thread ("online" softmax: when a larger value
// arrives, the sum so far is rescaled by exp(old max - new max)), the block merges the pairs,
// and sweep 2 writes exp(x - max) / sum. Rows are read as float4 (COLS % 4 == 0, a restriction).
#include "inputs.hpp"

#define LOWEST (-3.402823466e38f)  // the most negative finite float: exp(LOWEST - m) is 0, never NaN

// (m, s): the largest value seen and the sum of exp(v - m) over the values seen.
__device__ __forceinline__ void absorb(float& m, float& s, float v) {
    if (v > m) {
        s = s * expf(m - v) + 1.0f;
        m = v;
    } else {
        s += expf(v - m);
    }
}

// Symmetric in its two pairs, so both lanes of a butterfly step compute the same bits.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
    const float top = fmaxf(m, m2);
    s = s * expf(m - top) + s2 * expf(m2 - top);
    m = top;
}

__device__ __forceinline__ void warp_merge(float& m, float& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o);
        const float s2 = __shfl_xor_sync(0xffffffffu, s, o);
        merge(m, s, m2, s2);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS)
softmax_online(const float* __restrict__ X, float* __restrict__ Y) {
    __shared__ float warp_m[32], warp_s[32];
    const float4* x = reinterpret_cast<const float4*>(X + (size_t)blockIdx.x * COLS);
    float4* y = reinterpret_cast<float4*>(Y + (size_t)blockIdx.x * COLS);

    float m = LOWEST, s = 0.0f;
    for (int c = threadIdx.x; c < COLS / 4; c += BLOCK) {
        const float4 v = __ldg(&x[c]);
        absorb(m, s, v.x);
        absorb(m, s, v.y);
        absorb(m, s, v.z);
        absorb(m, s, v.w);
    }
    warp_merge(m, s);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        warp_m[warp] = m;
        warp_s[warp] = s;
    }
    __syncthreads();
    m = lane < BLOCK / 32 ? warp_m[lane] : LOWEST;
    s = lane < BLOCK / 32 ? warp_s[lane] : 0.0f;
    warp_merge(m, s);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < COLS / 4; c += BLOCK) {
        const float4 v = __ldg(&x[c]);
        y[c] = make_float4(expf(v.x - m) * inv, expf(v.y - m) * inv, expf(v.z - m) * inv, expf(v.w - m) * inv);
    }
}
