// mmul, branch "tiling", iteration 3: register blocking.
// A block computes a BM x BN tile of C with (BM/TM) x (BN/TN) threads; each thread keeps a
// TM x TN micro-tile of accumulators in registers, so each value loaded from shared memory
// feeds TM or TN FMAs instead of one. A is stored transposed in shared memory (As[k][m]) so
// the inner loop reads both tiles along rows.
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
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif
#ifndef PAD
#define PAD 0
#endif

constexpr int THREADS_X = BN / TN;
constexpr int THREADS_Y = BM / TM;
constexpr int NTHREADS = THREADS_X * THREADS_Y;

extern "C" __global__ void __launch_bounds__(NTHREADS)
mmul_regblock(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ float As[BK][BM + PAD];
    __shared__ float Bs[BK][BN + PAD];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * THREADS_X + tx;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < DIM_K; k0 += BK) {
        for (int i = tid; i < BM * BK; i += NTHREADS) {
            const int r = i / BK, c = i % BK;  // consecutive threads read along DIM_K: coalesced
            As[c][r] = (m0 + r < DIM_M && k0 + c < DIM_K) ? A[(size_t)(m0 + r) * DIM_K + k0 + c] : 0.0f;
        }
        for (int i = tid; i < BK * BN; i += NTHREADS) {
            const int r = i / BN, c = i % BN;
            Bs[r][c] = (k0 + r < DIM_K && n0 + c < DIM_N) ? B[(size_t)(k0 + r) * DIM_N + n0 + c] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx + j * THREADS_X];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = m0 + ty * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = n0 + tx + j * THREADS_X;  // neighbouring threads store neighbouring columns
            if (r < DIM_M && c < DIM_N) C[(size_t)r * DIM_N + c] = acc[i][j];
        }
    }
}
