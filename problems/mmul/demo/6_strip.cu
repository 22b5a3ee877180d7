// mmul, branch "strip": 1D register blocking. A block of BN x (BM/TM) threads computes a
// BM x BN tile; each thread accumulates TM consecutive rows of one column, so one value of
// B from shared memory feeds TM FMAs and the A values are warp-wide broadcasts.
#include "inputs.hpp"

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef PAD
#define PAD 0
#endif

constexpr int TY = BM / TM;
constexpr int NT = BN * TY;

extern "C" __global__ void __launch_bounds__(NT)
mmul_strip(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[BM][BK + PAD];
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * BN + tx;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

    for (int k0 = 0; k0 < DIM_K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += NT) {
            const int r = i / BK, c = i % BK;
            As[r][c] = (m0 + r < DIM_M && k0 + c < DIM_K) ? A[(size_t)(m0 + r) * DIM_K + k0 + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += NT) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < DIM_K && n0 + c < DIM_N) ? B[(size_t)(k0 + r) * DIM_N + n0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const float b = Bs[kk][tx];
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[ty * TM + i][kk], b, acc[i]);
        }
        __syncthreads();
    }
    const int c = n0 + tx;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m0 + ty * TM + i;
        if (r < DIM_M && c < DIM_N) C[(size_t)r * DIM_N + c] = acc[i];
    }
}
