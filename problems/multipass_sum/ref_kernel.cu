// Reference: one block of 256 threads per row; each thread adds a strided slice of the row,
// then the block adds the 256 partial sums in shared memory. Launched with grid (ROWS) and
// block (256). Integer addition, so any order gives the same sums.
extern "C" __global__ void rowsum_ref(const int* X, int* SUMS) {
    __shared__ int partial[256];
    const int row = blockIdx.x;
    const int* src = X + (size_t)row * COLS;
    int acc = 0;
    for (int i = threadIdx.x; i < COLS; i += 256) acc += src[i];
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int half = 128; half > 0; half >>= 1) {
        if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) SUMS[row] = partial[0];
}
