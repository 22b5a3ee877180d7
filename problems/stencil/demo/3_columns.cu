// stencil, branch "columns", iteration 1: each thread walks RY cells down one column and keeps
// the cell above and the centre in registers, so each step loads the cell below and the two
// horizontal neighbours only (those come from L1: the neighbouring threads load them as centres).
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(BX * BY)
stencil_columns(const float* __restrict__ IN, float* __restrict__ OUT) {
    const int x = blockIdx.x * BX + threadIdx.x;
    const int first = (blockIdx.y * BY + threadIdx.y) * RY;  // the first row this thread writes
    if (x >= NX || first >= NY) return;
    const int last = min(first + RY, NY);

    float above = first > 0 ? __ldg(&IN[(size_t)(first - 1) * NX + x]) : 0.0f;
    float mid = __ldg(&IN[(size_t)first * NX + x]);
    for (int y = first; y < last; ++y) {
        const size_t i = (size_t)y * NX + x;
        const float below = y + 1 < NY ? __ldg(&IN[i + NX]) : 0.0f;
        const bool border = x == 0 || y == 0 || x == NX - 1 || y == NY - 1;
        OUT[i] = border ? mid : 0.2f * (mid + above + below + __ldg(&IN[i - 1]) + __ldg(&IN[i + 1]));
        above = mid;
        mid = below;
    }
}
