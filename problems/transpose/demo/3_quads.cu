// transpose, branch "quads", iteration 1: each thread moves a 4 x 4 block with no shared memory.
// Four float4 loads from four consecutive rows of A, a transpose in registers, four float4
// stores to four consecutive rows of B. Needs ROWS and COLS to be multiples of 4 (a restriction
// of tuning.yaml), so every row starts on a 16-byte boundary.
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(BX * BY)
transpose_quads(const float* __restrict__ A, float* __restrict__ B) {
    const int qc = blockIdx.x * BX + threadIdx.x;  // columns 4*qc .. 4*qc+3 of A
    const int qr = blockIdx.y * BY + threadIdx.y;  // rows 4*qr .. 4*qr+3 of A
    if (qc >= COLS / 4 || qr >= ROWS / 4) return;
    const float4* a = reinterpret_cast<const float4*>(A);
    float4* b = reinterpret_cast<float4*>(B);
    const size_t a_row = COLS / 4, b_row = ROWS / 4;  // float4s per row of A and of B

    const float4 v0 = __ldg(&a[(size_t)(4 * qr + 0) * a_row + qc]);
    const float4 v1 = __ldg(&a[(size_t)(4 * qr + 1) * a_row + qc]);
    const float4 v2 = __ldg(&a[(size_t)(4 * qr + 2) * a_row + qc]);
    const float4 v3 = __ldg(&a[(size_t)(4 * qr + 3) * a_row + qc]);
    b[(size_t)(4 * qc + 0) * b_row + qr] = make_float4(v0.x, v1.x, v2.x, v3.x);
    b[(size_t)(4 * qc + 1) * b_row + qr] = make_float4(v0.y, v1.y, v2.y, v3.y);
    b[(size_t)(4 * qc + 2) * b_row + qr] = make_float4(v0.z, v1.z, v2.z, v3.z);
    b[(size_t)(4 * qc + 3) * b_row + qr] = make_float4(v0.w, v1.w, v2.w, v3.w);
}
