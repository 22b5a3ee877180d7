// mmul, branch "tiling.1-vec-dbuf": register blocking with 16-byte global loads and two
// shared-memory stages. While the block computes on one stage, the next K-slice is already
// in flight into registers (float4), then stored to the other stage: one __syncthreads per
// step instead of two, and four times fewer load instructions.
// Needs DIM_M % BM == DIM_N % BN == DIM_K % BK == 0 and BK, BN multiples of 4 (tuning.yaml restricts it).
#include "inputs.hpp"

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#ifndef PAD
#define PAD 4
#endif

constexpr int TX = BN / TN;
constexpr int TY = BM / TM;
constexpr int NT = TX * TY;
constexpr int A_VECS = BM * BK / 4;  // float4 loads per A tile
constexpr int B_VECS = BK * BN / 4;
constexpr int A_ITERS = (A_VECS + NT - 1) / NT;
constexpr int B_ITERS = (B_VECS + NT - 1) / NT;
static_assert(DIM_M % BM == 0 && DIM_N % BN == 0 && DIM_K % BK == 0, "tile sizes must divide the matrix sizes");
static_assert(BK % 4 == 0 && BN % 4 == 0, "float4 loads need BK and BN multiples of 4");

extern "C" __global__ void __launch_bounds__(NT)
mmul_vec_dbuf(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[2][BK][BM + PAD];  // transposed: As[s][k][m]
    __shared__ __align__(16) float Bs[2][BK][BN];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;

    float4 a_reg[A_ITERS];
    float4 b_reg[B_ITERS];

    auto load_global = [&](int k0) {
#pragma unroll
        for (int it = 0; it < A_ITERS; ++it) {
            const int v = tid + it * NT;
            if (v < A_VECS) {
                const int r = v / (BK / 4), c4 = v % (BK / 4);
                a_reg[it] = *reinterpret_cast<const float4*>(A + (size_t)(m0 + r) * DIM_K + k0 + c4 * 4);
            }
        }
#pragma unroll
        for (int it = 0; it < B_ITERS; ++it) {
            const int v = tid + it * NT;
            if (v < B_VECS) {
                const int r = v / (BN / 4), c4 = v % (BN / 4);
                b_reg[it] = *reinterpret_cast<const float4*>(B + (size_t)(k0 + r) * DIM_N + n0 + c4 * 4);
            }
        }
    };
    auto store_shared = [&](int s) {
#pragma unroll
        for (int it = 0; it < A_ITERS; ++it) {
            const int v = tid + it * NT;
            if (v < A_VECS) {
                const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
                As[s][c + 0][r] = a_reg[it].x;
                As[s][c + 1][r] = a_reg[it].y;
                As[s][c + 2][r] = a_reg[it].z;
                As[s][c + 3][r] = a_reg[it].w;
            }
        }
#pragma unroll
        for (int it = 0; it < B_ITERS; ++it) {
            const int v = tid + it * NT;
            if (v < B_VECS) {
                const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
                *reinterpret_cast<float4*>(&Bs[s][r][c]) = b_reg[it];
            }
        }
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    load_global(0);
    store_shared(0);
    __syncthreads();
    int stage = 0;
    for (int k0 = 0; k0 < DIM_K; k0 += BK) {
        const bool more = k0 + BK < DIM_K;
        if (more) load_global(k0 + BK);  // next slice in flight while we compute
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[stage][kk][ty * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[stage][kk][tx + j * TX];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (more) store_shared(stage ^ 1);  // the other stage was last read before the previous barrier
        __syncthreads();
        stage ^= 1;
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const size_t r = (size_t)(m0 + ty * TM + i);
#pragma unroll
        for (int j = 0; j < TN; ++j) C[r * DIM_N + n0 + tx + j * TX] = acc[i][j];
    }
}
