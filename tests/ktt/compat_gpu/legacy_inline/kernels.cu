// Known-good kernel for tests/compat/problems/legacy_inline: C = ALPHA * A .* B, element-wise,
// so the column-major layout only matters through the flat index. VEC elements per thread.
extern "C" __global__ void hadamard(const float* __restrict__ mat_a, const float* __restrict__ mat_b,
                                    float* __restrict__ mat_c) {
    const int n = M * N;
    const int stride = gridDim.x * blockDim.x * VEC;
    for (int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC; i < n; i += stride) {
#pragma unroll
        for (int v = 0; v < VEC; ++v)
            if (i + v < n) mat_c[i + v] = ALPHA * mat_a[i + v] * mat_b[i + v];  // the reference's order
    }
}
