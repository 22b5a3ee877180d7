extern "C" __global__ void relu(const float* X, float* Y) {
    const long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < N) Y[i] = fmaxf(X[i], 0.0f);
}
