// gemm_mma: C = A * B (B given as BT) on the tensor cores with warp-level mma.sync m16n8k16
// (bf16 in, fp32 accumulate), the way pre-Hopper GPUs do it.
//
// A block of WARPS_M x WARPS_N warps computes a BM x BN tile of C; each warp a WM x WN tile of
// MT x NT mma tiles. Per k-step of BK = 32 the block copies A's BM x BK and BT's BN x BK slices
// into shared memory with 16-byte loads (rows padded by 16 bytes, so the fragment reads are free
// of bank conflicts), then each warp reads its fragments as 32-bit words: both operands are
// K-major, so two consecutive k values of a row are one word, which is what mma.sync's A
// (row) and B (col) fragments hold.
#include "inputs.hpp"

#define BK 32
#define WM (16 * MT)
#define WN (8 * NT)
#define BM (WARPS_M * WM)
#define BN (WARPS_N * WN)
#define THREADS (32 * WARPS_M * WARPS_N)
#define ROW_WORDS (BK / 2 + 4)  // a row of BK bf16 (BK / 2 words) plus 4 words of padding

__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(THREADS)
gemm_mma(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ BT, float* __restrict__ C) {
    __shared__ __align__(16) unsigned As[BM * ROW_WORDS];
    __shared__ __align__(16) unsigned Bs[BN * ROW_WORDS];
    const unsigned* a = reinterpret_cast<const unsigned*>(A);
    const unsigned* b = reinterpret_cast<const unsigned*>(BT);
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, q = lane % 4;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;

    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

    for (int k0 = 0; k0 < DIM_K; k0 += BK) {
        // 16-byte pieces: BK / 8 per row (8 bf16 each).
        for (int v = tid; v < BM * (BK / 8); v += THREADS) {
            const int r = v / (BK / 8), c = v % (BK / 8);
            *reinterpret_cast<uint4*>(&As[r * ROW_WORDS + 4 * c]) =
                *reinterpret_cast<const uint4*>(&a[((size_t)(row0 + r) * DIM_K + k0) / 2 + 4 * c]);
        }
        for (int v = tid; v < BN * (BK / 8); v += THREADS) {
            const int r = v / (BK / 8), c = v % (BK / 8);
            *reinterpret_cast<uint4*>(&Bs[r * ROW_WORDS + 4 * c]) =
                *reinterpret_cast<const uint4*>(&b[((size_t)(col0 + r) * DIM_K + k0) / 2 + 4 * c]);
        }
        __syncthreads();
#pragma unroll
        for (int kw = 0; kw < BK / 2; kw += 8) {  // one k16 step = 8 words of a row
            unsigned af[MT][4], bf[NT][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const unsigned* p = &As[(wm + 16 * i + g) * ROW_WORDS + kw + q];
                af[i][0] = p[0];                   // row g,     k 2q, 2q+1
                af[i][1] = p[8 * ROW_WORDS];       // row g + 8, k 2q, 2q+1
                af[i][2] = p[4];                   // row g,     k 2q+8, 2q+9
                af[i][3] = p[8 * ROW_WORDS + 4];   // row g + 8, k 2q+8, 2q+9
            }
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const unsigned* p = &Bs[(wn + 8 * j + g) * ROW_WORDS + kw + q];
                bf[j][0] = p[0];  // column g, k 2q, 2q+1
                bf[j][1] = p[4];  // column g, k 2q+8, 2q+9
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT; ++j) mma_bf16(acc[i][j], af[i], bf[j]);
        }
        __syncthreads();
    }
    // The accumulator of an m16n8 tile: (g, 2q), (g, 2q+1), (g+8, 2q), (g+8, 2q+1).
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            const size_t r = row0 + wm + 16 * i + g;
            const size_t c = col0 + wn + 8 * j + 2 * q;
            *reinterpret_cast<float2*>(&C[r * DIM_N + c]) = make_float2(acc[i][j][0], acc[i][j][1]);
            *reinterpret_cast<float2*>(&C[(r + 8) * DIM_N + c]) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}
