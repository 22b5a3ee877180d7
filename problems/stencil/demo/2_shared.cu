// stencil, branch "tiles", iteration 2: the block stages its (BY + 2) x (BX + 2) patch of IN,
// halo included, in shared memory (one global load per patch cell, cells outside the grid
// read as 0 and never used), then each thread reads its five values from the patch.
#include "inputs.hpp"

#define PATCH_W (BX + 2)
#define PATCH_H (BY + 2)

extern "C" __global__ void __launch_bounds__(BX * BY)
stencil_shared(const float* __restrict__ IN, float* __restrict__ OUT) {
    __shared__ float patch[PATCH_H][PATCH_W];
    const int x0 = blockIdx.x * BX, y0 = blockIdx.y * BY;  // the block's first cell
    for (int k = threadIdx.y * BX + threadIdx.x; k < PATCH_H * PATCH_W; k += BX * BY) {
        const int py = k / PATCH_W, px = k % PATCH_W;
        const int gy = y0 - 1 + py, gx = x0 - 1 + px;
        patch[py][px] = (gx >= 0 && gx < NX && gy >= 0 && gy < NY) ? __ldg(&IN[(size_t)gy * NX + gx]) : 0.0f;
    }
    __syncthreads();

    const int x = x0 + threadIdx.x, y = y0 + threadIdx.y;
    if (x >= NX || y >= NY) return;
    const int px = threadIdx.x + 1, py = threadIdx.y + 1;
    const float mid = patch[py][px];
    float out = mid;  // border cells copy IN
    if (x > 0 && y > 0 && x < NX - 1 && y < NY - 1)
        out = 0.2f * (mid + patch[py - 1][px] + patch[py + 1][px] + patch[py][px - 1] + patch[py][px + 1]);
    OUT[(size_t)y * NX + x] = out;
}
