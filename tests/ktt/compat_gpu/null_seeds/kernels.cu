// Known-good kernel for tests/compat/problems/null_seeds: Y = clamp(X, -1, 1), VEC elements
// per thread (the same comparisons as the reference, so the result is exact).
extern "C" __global__ void clamp_k(const float* __restrict__ X, float* __restrict__ Y) {
    const long long first = ((long long)blockIdx.x * BLOCK + threadIdx.x) * VEC;
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
        const long long i = first + v;
        if (i < N) {
            const float x = X[i];
            Y[i] = x < -1.0f ? -1.0f : (x > 1.0f ? 1.0f : x);
        }
    }
}
