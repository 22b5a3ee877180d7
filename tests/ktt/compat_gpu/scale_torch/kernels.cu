// Known-good kernel for problems/scale_torch: y = 2 * x + 1 (one rounding per step, as torch's
// x * 2.0 + 1.0 on float32: the product is exact, so fused or not the result is the same).
extern "C" __global__ void scale_shift(const float* __restrict__ x, float* __restrict__ y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = x[i] * 2.0f + 1.0f;
}
