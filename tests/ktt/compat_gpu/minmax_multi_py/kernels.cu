// Known-good kernel for tests/compat/problems/minmax_multi_py: one warp per row, min and max
// reduced with shuffles (exact: min/max do not round).
extern "C" __global__ void minmax_rows(const int n_rows, const float* __restrict__ data, float* __restrict__ lo,
                                       float* __restrict__ hi) {
    const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (warp >= n_rows) return;
    const float* row = data + (long)warp * K_COLS;
    float mn = row[0], mx = row[0];
    for (int k = lane; k < K_COLS; k += 32) {
        mn = fminf(mn, row[k]);
        mx = fmaxf(mx, row[k]);
    }
    for (int off = 16; off > 0; off /= 2) {
        mn = fminf(mn, __shfl_down_sync(0xffffffffu, mn, off));
        mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, off));
    }
    if (lane == 0) {
        lo[warp] = mn;
        hi[warp] = mx;
    }
}
