// Known-good kernel for bench/kernelbench/modules/elementwise_relu.py (imported by cacao import):
// out = max(x, 0), one float4 per thread per step of a grid-stride loop. Boundary: (x, out).
#include "inputs.hpp"

extern "C" __global__ void relu_f4(const float* __restrict__ x, float* __restrict__ out) {
    const size_t n4 = (size_t)BATCH_SIZE * DIM / 4;
    const float4* in = reinterpret_cast<const float4*>(x);
    float4* o = reinterpret_cast<float4*>(out);
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = __ldg(&in[i]);
        o[i] = make_float4(fmaxf(v.x, 0.0f), fmaxf(v.y, 0.0f), fmaxf(v.z, 0.0f), fmaxf(v.w, 0.0f));
    }
}
