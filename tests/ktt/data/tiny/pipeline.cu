// A two-kernel pipeline through a scratch buffer: tmp = 3 X, then Y = tmp.
// SPILL = 1 makes the first kernel write one element past the end of the scratch buffer.
#include "inputs.hpp"

extern "C" __global__ void stage1(const float* X, float* tmp, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tmp[i] = 3.0f * X[i];
    if (SPILL && i == 0) tmp[n] = 1.0f;
}

extern "C" __global__ void stage2(const float* tmp, float* Y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) Y[i] = tmp[i];
}
