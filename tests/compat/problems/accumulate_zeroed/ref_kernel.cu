// Reference for the compat corpus's accumulate_zeroed: one atomicAdd per element into
// TOTAL, which starts every run at zero (its init). Integers, so the order does not matter.
extern "C" __global__ void total_ref(const int* X, int* TOTAL) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) atomicAdd(TOTAL, X[i]);
}
