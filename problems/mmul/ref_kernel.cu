// Reference: one thread per output element, no reuse. Launched with the problem's grid
// (DIM_N/16, DIM_M/16) and reference.block (16, 16). DIM_M, DIM_N and DIM_K arrive as -D macros.
extern "C" __global__ void mmul_ref(const float* A, const float* B, float* C) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= DIM_M || col >= DIM_N) return;
    float acc = 0.0f;
    for (int k = 0; k < DIM_K; ++k) acc += A[(size_t)row * DIM_K + k] * B[(size_t)k * DIM_N + col];
    C[(size_t)row * DIM_N + col] = acc;
}
