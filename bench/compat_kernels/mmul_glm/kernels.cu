// Known-good kernel for the original's problems/mmul_glm (cuda reference, older inline form):
// C[col*M + row] = sum_k A[k*M + row] * B[k*N + col]. Shared-memory tiles of TS x TS; each
// thread computes WPT outputs of one row, TS/WPT columns apart. M, N, K are multiples of TS.
#define RTS (TS / WPT)

extern "C" __global__ void gemm_tiled(const float* __restrict__ mat_a, const float* __restrict__ mat_b,
                                      float* __restrict__ mat_c) {
    __shared__ float As[TS][TS + 1];  // As[k][row]
    __shared__ float Bs[TS][TS + 1];  // Bs[k][col]
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.x * TS + tx;
    const int col0 = blockIdx.y * TS;
    float acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w) acc[w] = 0.0f;
    for (int t = 0; t < K; t += TS) {
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int kk = ty + w * RTS;
            As[kk][tx] = mat_a[(long)(t + kk) * M + row];
            Bs[kk][tx] = mat_b[(long)(t + kk) * N + col0 + tx];
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
    for (int w = 0; w < WPT; ++w) mat_c[(long)(col0 + ty + w * RTS) * M + row] = acc[w];
}
