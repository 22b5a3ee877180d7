// gemm_simt: the CUDA-core baseline for gemm_bf16, C = A * B with B given as BT (DIM_N x DIM_K).
//
// A plain register-tiled SGEMM on bf16 inputs: each block computes a BM x BN tile of C, each
// thread TM x TN outputs. Per step of BK along k the block stages A's BM x BK slice and BT's
// BN x BK slice in shared memory, converted to fp32 and stored k-major (As[k][m], Bs[k][n]) so
// the inner loop is an outer product of TM values of A and TN of B; fp32 FMA throughout, no
// tensor cores. A and BT are read as 32-bit words, two consecutive bf16 of a row each: a bf16
// is the upper half of an fp32, so the conversion is a shift.
#include "inputs.hpp"

#define THREADS ((BM / TM) * (BN / TN))

// Stage ROWS x BK values of a K-major bf16 matrix (rows `first`.., columns k0..) as fp32 in
// S[k][row]; each 32-bit word is two consecutive k values of one row.
template <int ROWS, int PITCH>
__device__ __forceinline__ void stage(float (*S)[PITCH], const unsigned int* src, int first, int k0, int tid) {
    for (int v = tid; v < ROWS * BK / 2; v += THREADS) {
        const int r = v / (BK / 2);
        const int c = (v % (BK / 2)) * 2;
        const unsigned int w = src[((size_t)(first + r) * DIM_K + k0 + c) / 2];
        S[c][r] = __uint_as_float(w << 16);              // element 2i: the low half
        S[c + 1][r] = __uint_as_float(w & 0xFFFF0000u);  // element 2i + 1: the high half
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_simt(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ BT, float* __restrict__ C) {
    __shared__ float As[BK][BM + 4];
    __shared__ float Bs[BK][BN + 4];
    const unsigned int* a = reinterpret_cast<const unsigned int*>(A);
    const unsigned int* b = reinterpret_cast<const unsigned int*>(BT);
    const int tid = threadIdx.x;
    const int tcol = tid % (BN / TN);
    const int trow = tid / (BN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < DIM_K; k0 += BK) {
        stage<BM, BM + 4>(As, a, row0, k0, tid);
        stage<BN, BN + 4>(Bs, b, col0, k0, tid);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float av[TM], bv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) av[i] = As[k][trow * TM + i];
#pragma unroll
            for (int j = 0; j < TN; ++j) bv[j] = Bs[k][tcol * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) C[(size_t)(row0 + trow * TM + i) * DIM_N + col0 + tcol * TN + j] = acc[i][j];
}
