// softmax, branch "block-row", iteration 1: one block per row, three sweeps over the row.
// Sweep 1 finds the row's maximum, sweep 2 adds exp(x - max), sweep 3 writes exp(x - max) / sum.
// Each sweep reads the row from global memory again (the later two mostly from L2). Block-wide
// reductions: a warp butterfly, one value per warp in shared memory, a second butterfly.
#include "inputs.hpp"

#define LOWEST (-3.402823466e38f)  // the most negative finite float: exp(LOWEST - m) is 0, never NaN

struct MaxOp {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct AddOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};

// Every thread of the block gets the result.
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, Op op, float identity, float* per_warp) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) per_warp[warp] = v;
    __syncthreads();
    v = lane < BLOCK / 32 ? per_warp[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    __syncthreads();  // per_warp is reused by the next reduction
    return v;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_sweeps(const float* __restrict__ X, float* __restrict__ Y) {
    __shared__ float per_warp[32];
    const float* x = X + (size_t)blockIdx.x * COLS;
    float* y = Y + (size_t)blockIdx.x * COLS;

    float m = LOWEST;
    for (int c = threadIdx.x; c < COLS; c += BLOCK) m = fmaxf(m, x[c]);
    m = block_reduce(m, MaxOp(), LOWEST, per_warp);

    float s = 0.0f;
    for (int c = threadIdx.x; c < COLS; c += BLOCK) s += expf(x[c] - m);
    s = block_reduce(s, AddOp(), 0.0f, per_warp);

    const float inv = 1.0f / s;
    for (int c = threadIdx.x; c < COLS; c += BLOCK) y[c] = expf(x[c] - m) * inv;
}
