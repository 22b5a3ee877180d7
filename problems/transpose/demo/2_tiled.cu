// transpose, branch "tiles", iteration 2: a TILE x TILE tile of A goes through shared memory.
// A block of TILE x STEP threads reads the tile row by row (coalesced), then writes the
// transposed tile row by row into B (coalesced too), each thread moving TILE / STEP elements
// each way. PAD = 1 shifts each row of the tile by one bank, so the column reads of the
// second half hit 32 different banks instead of one.
#include "inputs.hpp"

extern "C" __global__ void __launch_bounds__(TILE * STEP)
transpose_tiled(const float* __restrict__ A, float* __restrict__ B) {
    __shared__ float tile[TILE][TILE + PAD];
    const int col0 = blockIdx.x * TILE;  // the tile's first column of A (first row of B)
    const int row0 = blockIdx.y * TILE;  // the tile's first row of A (first column of B)

    for (int j = threadIdx.y; j < TILE; j += STEP) {
        const int r = row0 + j, c = col0 + threadIdx.x;
        if (r < ROWS && c < COLS) tile[j][threadIdx.x] = A[(size_t)r * COLS + c];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < TILE; j += STEP) {
        const int c = col0 + j, r = row0 + threadIdx.x;  // B[c, r] = A[r, c] = tile[r - row0][c - col0]
        if (r < ROWS && c < COLS) B[(size_t)c * ROWS + r] = tile[threadIdx.x][j];
    }
}
