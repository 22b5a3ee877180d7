// Known-good kernel for the original's problems/mmul_python (numpy reference, column-major):
// C[col*M + row] = sum_k A[k*M + row] * B[col*K + k]. Shared-memory tiles of TS x TS; each
// thread computes WPT outputs of one row, TS/WPT columns apart. M, N, K are multiples of TS.
#define RTS (TS / WPT)

extern "C" __global__ void gemm_colmajor(const int kSizeM, const int kSizeN, const int kSizeK,
                                         const float* __restrict__ mat_a, const float* __restrict__ mat_b,
                                         float* __restrict__ mat_c) {
    (void)kSizeN;
    __shared__ float As[TS][TS + 1];  // As[k][row]
    __shared__ float Bs[TS][TS + 1];  // Bs[k][col]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.x * TS + tx;
    const int col0 = blockIdx.y * TS;
    float acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int t = 0; t < kSizeK; t += TS) {
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int r = ty + w * RTS;
            As[r][tx] = mat_a[(long)(t + r) * kSizeM + row];          // A[row, t + r]
            Bs[tx][r] = mat_b[(long)(col0 + r) * kSizeK + t + tx];     // B[t + tx, col0 + r]
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < TS; ++kk) {
            const float a = As[kk][tx];
#pragma unroll
            for (int w = 0; w < WPT; ++w) acc[w] += a * Bs[kk][ty + w * RTS];
        }
        __syncthreads();
    }
#pragma unroll
    for (int w = 0; w < WPT; ++w) mat_c[(long)(col0 + ty + w * RTS) * kSizeM + row] = acc[w];
}
