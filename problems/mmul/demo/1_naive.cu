// mmul, branch "tiling", iteration 1: one thread per element of C.
// threadIdx.x walks along DIM_N, so a warp reads one row segment of B and writes one of C
// (coalesced); A[row, k] is the same for the whole warp (a broadcast).
#include "inputs.hpp"

#ifndef BLOCK_X
#define BLOCK_X 32
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
mmul_naive(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    const int col = blockIdx.x * BLOCK_X + threadIdx.x;
    const int row = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (row >= DIM_M || col >= DIM_N) return;
    const float* a = A + (size_t)row * DIM_K;
    float acc = 0.0f;
#pragma unroll 8
    for (int k = 0; k < DIM_K; ++k) acc = fmaf(a[k], B[(size_t)k * DIM_N + col], acc);
    C[(size_t)row * DIM_N + col] = acc;
}
