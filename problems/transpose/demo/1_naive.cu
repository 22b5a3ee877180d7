// transpose, branch "tiles", iteration 1: one thread per element, B[c, r] = A[r, c].
// threadIdx.x walks along a row of A, so the reads are coalesced; the writes of a warp land
// ROWS floats apart (one 32-byte sector per thread), which is what the next iteration fixes.
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(BX * BY)
transpose_naive(const float* __restrict__ A, float* __restrict__ B) {
    const int c = blockIdx.x * BX + threadIdx.x;
    const int r = blockIdx.y * BY + threadIdx.y;
    if (r < ROWS && c < COLS) B[(size_t)c * ROWS + r] = A[(size_t)r * COLS + c];
}
