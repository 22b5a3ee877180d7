// mmul, branch "quad": shared-memory tiling where each thread computes a 2 x 2 group of
// outputs TILE apart, so a block of TILE x TILE threads covers a 2*TILE square of C and each
// shared-memory value feeds two FMAs.
#include "inputs.hpp"

#ifndef TILE
#define TILE 16
#endif
#ifndef PAD
#define PAD 0
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
mmul_quad(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[2 * TILE][TILE + PAD];
    __shared__ float Bs[TILE][2 * TILE + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m0 = blockIdx.y * 2 * TILE, n0 = blockIdx.x * 2 * TILE;
    const int r0 = m0 + ty, r1 = m0 + ty + TILE;
    const int c0 = n0 + tx, c1 = n0 + tx + TILE;
    float acc00 = 0.0f, acc01 = 0.0f, acc10 = 0.0f, acc11 = 0.0f;
    for (int k0 = 0; k0 < DIM_K; k0 += TILE) {
        const int k = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (r0 < DIM_M && k < DIM_K) ? A[(size_t)r0 * DIM_K + k] : 0.0f;
        As[ty + TILE][tx] = (r1 < DIM_M && k < DIM_K) ? A[(size_t)r1 * DIM_K + k] : 0.0f;
        Bs[ty][tx] = (kb < DIM_K && c0 < DIM_N) ? B[(size_t)kb * DIM_N + c0] : 0.0f;
        Bs[ty][tx + TILE] = (kb < DIM_K && c1 < DIM_N) ? B[(size_t)kb * DIM_N + c1] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) {
            const float a0 = As[ty][kk], a1 = As[ty + TILE][kk];
            const float b0 = Bs[kk][tx], b1 = Bs[kk][tx + TILE];
            acc00 = fmaf(a0, b0, acc00);
            acc01 = fmaf(a0, b1, acc01);
            acc10 = fmaf(a1, b0, acc10);
            acc11 = fmaf(a1, b1, acc11);
        }
        __syncthreads();
    }
    if (r0 < DIM_M && c0 < DIM_N) C[(size_t)r0 * DIM_N + c0] = acc00;
    if (r0 < DIM_M && c1 < DIM_N) C[(size_t)r0 * DIM_N + c1] = acc01;
    if (r1 < DIM_M && c0 < DIM_N) C[(size_t)r1 * DIM_N + c0] = acc10;
    if (r1 < DIM_M && c1 < DIM_N) C[(size_t)r1 * DIM_N + c1] = acc11;
}
