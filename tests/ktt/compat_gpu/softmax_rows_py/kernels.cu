// Known-good kernel for tests/compat/problems/softmax_rows_py: one block per row; the row
// maximum and the sum of exponentials are block reductions in shared memory.
extern "C" __global__ void softmax_rows(const float* __restrict__ inp, float* __restrict__ out) {
    __shared__ float red[BLOCK];
    const float* x = inp + (long)blockIdx.x * COLS;
    float* y = out + (long)blockIdx.x * COLS;
    float m = -3.402823466e+38f;  // -FLT_MAX
    for (int c = threadIdx.x; c < COLS; c += BLOCK) m = fmaxf(m, x[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.0f;
    for (int c = threadIdx.x; c < COLS; c += BLOCK) sum += expf(x[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = BLOCK / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    const float inv = 1.0f / red[0];
    for (int c = threadIdx.x; c < COLS; c += BLOCK) y[c] = expf(x[c] - m) * inv;
}
