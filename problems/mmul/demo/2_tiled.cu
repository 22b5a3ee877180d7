// mmul, branch "tiling", iteration 2: square shared-memory tiles.
// Each block stages a TILE x TILE tile of A and of B per step along DIM_K, so every
// global element is read by one block TILE times less often than in the naive kernel.
#include "inputs.hpp"

#ifndef TILE
#define TILE 16
#endif
#ifndef PAD
#define PAD 0
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
mmul_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[TILE][TILE + PAD];
    __shared__ float Bs[TILE][TILE + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < DIM_K; k0 += TILE) {
        As[ty][tx] = (row < DIM_M && k0 + tx < DIM_K) ? A[(size_t)row * DIM_K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < DIM_K && col < DIM_N) ? B[(size_t)(k0 + ty) * DIM_N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc = fmaf(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }
    if (row < DIM_M && col < DIM_N) C[(size_t)row * DIM_N + col] = acc;
}
