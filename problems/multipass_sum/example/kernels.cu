// One pass of a row-wise tree reduction, launched again and again by tuning.yaml's repeat block.
//
// A block of BS threads folds R = BS * IPT consecutive values of one row (blockIdx.y) into one
// partial sum: each thread adds IPT values (coalesced: thread t reads t, t + BS, ...), then a
// warp-shuffle reduction and one shared-memory step give the block's total, written to
// out[row * out_stride + blockIdx.x]. `n` values per row are read from `in` (row stride
// in_stride). The pass whose grid has one block per row has the rows' totals: it also writes
// SUMS and raises the done flag, which ends the repeat block (until: done).
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(BS)
sum_pass(const int* __restrict__ in, int* __restrict__ out, int* __restrict__ sums, int* __restrict__ done,
         int n, int in_stride, int out_stride) {
    __shared__ int warp_total[BS / 32];
    const int row = blockIdx.y;
    const int* src = in + (size_t)row * in_stride;
    const long long first = (long long)blockIdx.x * (BS * IPT) + threadIdx.x;
    int acc = 0;
#pragma unroll
    for (int k = 0; k < IPT; ++k) {
        const long long i = first + (long long)k * BS;
        if (i < n) acc += __ldg(&src[i]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if ((threadIdx.x & 31) == 0) warp_total[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x >= 32) return;
    acc = threadIdx.x < BS / 32 ? warp_total[threadIdx.x] : 0;
    for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (threadIdx.x == 0) {
        out[(size_t)row * out_stride + blockIdx.x] = acc;
        if (gridDim.x == 1) {
            sums[row] = acc;
            if (row == 0) *done = 1;
        }
    }
}
