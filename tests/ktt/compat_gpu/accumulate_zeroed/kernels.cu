// Known-good kernel for tests/compat/problems/accumulate_zeroed: each block sums ITEMS * BLOCK
// elements (warp shuffles, then one warp over the per-warp sums) and adds its sum to TOTAL with
// one atomicAdd. Correct only because TOTAL starts every run at zero, its init: the original's
// contract, which ktt keeps unless the problem sets validation.poison_outputs.
extern "C" __global__ void total(const int* __restrict__ X, int* __restrict__ TOTAL) {
    __shared__ int partial[BLOCK / 32];
    int sum = 0;
    const long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const long long i = base + (long long)k * BLOCK;
        if (i < N) sum += X[i];
    }
    for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x < 32) {
        sum = threadIdx.x < BLOCK / 32 ? partial[threadIdx.x] : 0;
        for (int offset = 16; offset > 0; offset >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, offset);
        if (threadIdx.x == 0) atomicAdd(TOTAL, sum);
    }
}
