// BEHAVIOUR is read by the fake worker in tests (0 fine, 1 hang, 2 crash); BLOCK and UNROLL are ordinary.
#include "inputs.hpp"

extern "C" __global__ void scale(const float* __restrict__ X, float* __restrict__ Y) {
    int i = (blockIdx.x * BLOCK + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u)
        if (i + u < N) Y[i + u] = 3.0f * X[i + u];
#if BEHAVIOUR == 9
    this does not compile;
#endif
}
