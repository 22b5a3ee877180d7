// One block per row: each thread sums a strided slice of the row, cub::BlockReduce adds
// the threads' partial sums. ALGO picks cub's algorithm; UNROLL the inner loop's unrolling.
#include "inputs.hpp"
#include <cub/block/block_reduce.cuh>

constexpr cub::BlockReduceAlgorithm kAlgo = ALGO == 0   ? cub::BLOCK_REDUCE_WARP_REDUCTIONS
                                            : ALGO == 1 ? cub::BLOCK_REDUCE_RAKING
                                                        : cub::BLOCK_REDUCE_RAKING_COMMUTATIVE_ONLY;

extern "C" __global__ void __launch_bounds__(BLOCK) row_sum(const float* __restrict__ X, float* __restrict__ Y) {
    using Reduce = cub::BlockReduce<float, BLOCK, kAlgo>;
    __shared__ typename Reduce::TempStorage tmp;
    const float* x = X + (size_t)blockIdx.x * COLS;
    float v = 0.0f;
#pragma unroll UNROLL
    for (int c = threadIdx.x; c < COLS; c += BLOCK) v += x[c];
    const float s = Reduce(tmp).Sum(v);
    if (threadIdx.x == 0) Y[blockIdx.x] = s;
}
