// multipass_sum, branch "atomics", iteration 1: one pass over X and a tiny copy.
// Block (b, r) adds BS * IPT consecutive values of row r (thread t reads t, t + BS, ...) and
// atomically adds its total to totals[r], a scratch buffer zeroed before every run; the
// second launch copies totals into SUMS. Integer atomics: exact in any order.
#include "inputs.hpp"

#define SPAN (BS * IPT)  // values of a row per block

extern "C" __global__ void __launch_bounds__(BS)
rowsum_atomic(const int* __restrict__ X, int* __restrict__ totals) {
    __shared__ int per_warp[BS / 32];
    const int row = blockIdx.y;
    const int* src = X + (size_t)row * COLS;
    const long long first = (long long)blockIdx.x * SPAN + threadIdx.x;
    int acc = 0;
#pragma unroll
    for (int k = 0; k < IPT; ++k) {
        const long long i = first + (long long)k * BS;
        if (i < COLS) acc += __ldg(&src[i]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((threadIdx.x & 31) == 0) per_warp[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < BS / 32 ? per_warp[threadIdx.x] : 0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
        if (threadIdx.x == 0) atomicAdd(&totals[row], acc);
    }
}

extern "C" __global__ void copy_totals(const int* __restrict__ totals, int* __restrict__ SUMS) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < ROWS) SUMS[row] = totals[row];
}
