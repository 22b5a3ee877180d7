// Out-of-place transpose through a shared-memory tile: B[c, r] = A[r, c], A is ROWS x COLS.
//
// A block reads a TILE x TILE tile of A with coalesced row reads, and writes it to B
// with coalesced row writes of the transposed tile; the +1 column of padding keeps the
// column reads of the tile free of bank conflicts. Each thread moves TILE / BLOCK_ROWS
// elements each way. ROWS and COLS (macros from inputs.hpp / -D) need not be multiples of TILE.
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(TILE * BLOCK_ROWS)
transpose_tiled(const float* __restrict__ A, float* __restrict__ B) {
    __shared__ float tile[TILE][TILE + 1];

    const int x = blockIdx.x * TILE + threadIdx.x;  // column of A
    const int y0 = blockIdx.y * TILE + threadIdx.y;  // first row of A
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int y = y0 + j;
        if (x < COLS && y < ROWS) tile[threadIdx.y + j][threadIdx.x] = A[(size_t)y * COLS + x];
    }
    __syncthreads();

    const int xo = blockIdx.y * TILE + threadIdx.x;  // column of B (a row of A)
    const int yo0 = blockIdx.x * TILE + threadIdx.y;  // first row of B (a column of A)
#pragma unroll
    for (int j = 0; j < TILE; j += BLOCK_ROWS) {
        const int yo = yo0 + j;
        if (xo < ROWS && yo < COLS) B[(size_t)yo * ROWS + xo] = tile[threadIdx.x][threadIdx.y + j];
    }
}
