// Known-good kernel for tests/compat/problems/terrain_custom: one thread per map cell.
extern "C" __global__ void below_level(const int* __restrict__ heights, int* __restrict__ mask) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= MAP_W || y >= MAP_H) return;
    const long i = (long)y * MAP_W + x;
    mask[i] = heights[i] <= LEVEL ? 1 : 0;
}
