// Known-good kernel for bench/kernelbench/modules/softmax_logsumexp.py (imported by cacao import):
// one block per row, the row held in registers (COLS / (4 * BLOCK) float4s per thread); the
// block reduces the row maximum, then the sum of exp(x - max); out0 = exp(x - max) / sum (the
// softmax) and out1[row] = max + log(sum) (the log-sum-exp). One read of x for both outputs.
// Boundary: (x, out0, out1).
#include "inputs.hpp"

#define PER (COLS / (4 * BLOCK))
#define WARPS (BLOCK / 32)
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = lane < WARPS ? scratch[lane] : (IS_MAX ? NEG_INF : 0.0f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();
    return r;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_lse(const float* __restrict__ x, float* __restrict__ out0, float* __restrict__ out1) {
    __shared__ float scratch[32];
    const size_t row = blockIdx.x;
    const float4* in = reinterpret_cast<const float4*>(x + row * COLS);
    float4* y = reinterpret_cast<float4*>(out0 + row * COLS);

    float4 v[PER];
    float m = NEG_INF;
#pragma unroll
    for (int p = 0; p < PER; ++p) {
        v[p] = __ldg(&in[threadIdx.x + p * BLOCK]);
        m = fmaxf(m, fmaxf(fmaxf(v[p].x, v[p].y), fmaxf(v[p].z, v[p].w)));
    }
    m = block_reduce<true>(m, scratch);

    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < PER; ++p) {
        v[p].x = expf(v[p].x - m);
        v[p].y = expf(v[p].y - m);
        v[p].z = expf(v[p].z - m);
        v[p].w = expf(v[p].w - m);
        s += (v[p].x + v[p].y) + (v[p].z + v[p].w);
    }
    s = block_reduce<false>(s, scratch);

    const float inv = 1.0f / s;
#pragma unroll
    for (int p = 0; p < PER; ++p)
        y[threadIdx.x + p * BLOCK] = make_float4(v[p].x * inv, v[p].y * inv, v[p].z * inv, v[p].w * inv);
    if (threadIdx.x == 0) out1[row] = m + logf(s);
}
