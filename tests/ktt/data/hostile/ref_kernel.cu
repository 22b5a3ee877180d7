extern "C" __global__ void axpb_ref(const float* X, float* Y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) Y[i] = 2.0f * X[i] + 1.0f;
}
