// 5-point Jacobi sweep with a register sliding window: each thread walks RY rows down one
// column, so the centre and the row above come from registers and each step loads one
// new row value plus the two horizontal neighbours (served by L1). Border cells copy IN.
// NX and NY (macros, different per case) need not be multiples of the block shape.
// The sum is formed in the reference's order, so results match it bit for bit.
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(BX * BY)
stencil5(const float* __restrict__ IN, float* __restrict__ OUT) {
    const int x = blockIdx.x * BX + threadIdx.x;
    const int y0 = (blockIdx.y * BY + threadIdx.y) * RY;
    if (x >= NX || y0 >= NY) return;

    float up = y0 > 0 ? __ldg(&IN[(size_t)(y0 - 1) * NX + x]) : 0.0f;
    float mid = __ldg(&IN[(size_t)y0 * NX + x]);
#pragma unroll
    for (int r = 0; r < RY; ++r) {
        const int y = y0 + r;
        if (y >= NY) break;
        const size_t i = (size_t)y * NX + x;
        const float down = y + 1 < NY ? __ldg(&IN[i + NX]) : 0.0f;
        if (x == 0 || y == 0 || x == NX - 1 || y == NY - 1) {
            OUT[i] = mid;
        } else {
            const float s = mid + up + down + __ldg(&IN[i - 1]) + __ldg(&IN[i + 1]);
            OUT[i] = 0.2f * s;
        }
        up = mid;
        mid = down;
    }
}
