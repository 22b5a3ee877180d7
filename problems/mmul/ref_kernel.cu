// Reference: one thread per output element, no reuse. Launched with the problem's grid
// (N/16, M/16) and reference.block (16, 16). M, N and K arrive as -D macros.
extern "C" __global__ void mmul_ref(const float* A, const float* B, float* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}
